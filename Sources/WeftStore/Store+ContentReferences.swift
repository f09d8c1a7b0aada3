import GRDB
import WeftModel

// Which content the held messages refer to (SPEC.md §11.2): what retention keeps, and what a
// node starting wants. Every message operation held counts, in any status and in every log
// (those only relayed too), until the operation is deleted.
extension Store {
    /// The most roots one call of `fetchReferencedContent(among:)` or one page of
    /// `fetchContentReferences(after:limit:)` takes: callers page through more.
    public static let maxContentReferencePage = 1_024

    /// Of `roots` (at most `maxContentReferencePage`; the rest are not looked at), those that a
    /// message the store holds has a part of.
    public func fetchReferencedContent(among roots: [ContentRoot]) async throws -> Set<ContentRoot> {
        let roots = Array(roots.prefix(Self.maxContentReferencePage))
        return try await database.read { db in try ContentReferenceTable.referenced(roots, in: db) }
    }

    /// The contents that held messages have parts of, by root in byte order: up to `limit`
    /// (at most `maxContentReferencePage`) after `root`, from the first if nil. Page on from
    /// the last root returned until a page comes back empty.
    public func fetchContentReferences(after root: ContentRoot?, limit: Int) async throws -> [ContentReference] {
        let limit = max(1, min(limit, Self.maxContentReferencePage))
        return try await database.read { db in try ContentReferenceTable.page(after: root, limit: limit, in: db) }
    }
}
