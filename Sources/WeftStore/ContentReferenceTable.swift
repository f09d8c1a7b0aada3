import Foundation
import GRDB
import WeftModel

/// Which held messages refer to which content (SPEC.md §11.1 `content_reference`, §11.2): one
/// row per (content root, message operation) for every message operation the log holds, in any
/// status and in every log, the relayed ones too (they have no `part` rows, §14.9).
///
/// Content is kept while a row names it and removed once none does (retention). Rows are
/// written with their operation (`Materializer.insertOperation`) and go with it: a trigger
/// deletes them when the operation row is deleted, whichever path deletes it (pruning, pending
/// operations expiring or over their bound), so the table never disagrees with the log.
enum ContentReferenceTable {
    /// The table, the index the trigger deletes by, and the trigger (migration v8).
    static let creationSQL = """
        CREATE TABLE content_reference (
            root BLOB NOT NULL,
            operation BLOB NOT NULL,
            conversation BLOB NOT NULL,
            descriptor BLOB NOT NULL,
            mimeType TEXT NOT NULL,
            PRIMARY KEY (root, operation)
        ) WITHOUT ROWID;
        CREATE INDEX content_reference_on_operation ON content_reference(operation);
        CREATE TRIGGER content_reference_follows_operation AFTER DELETE ON operation WHEN old.kind = 10
        BEGIN
            DELETE FROM content_reference WHERE operation = old.id;
        END;
        """

    static let insertSQL = """
        INSERT INTO content_reference (root, operation, conversation, descriptor, mimeType) VALUES (?, ?, ?, ?, ?)
        """

    /// Records the content parts of `signed`, an operation stored for the first time (nothing
    /// for an operation without any). A root named by two parts of one message is recorded once.
    static func add(_ signed: SignedOperation, in db: Database) throws {
        guard case .postMessage(let parts, _) = signed.operation.body else { return }
        var seen: Set<ContentRoot> = []
        for part in parts {
            guard let descriptor = part.content, seen.insert(descriptor.root).inserted else { continue }
            try db.cachedStatement(sql: insertSQL).execute(arguments: [
                Data(descriptor.root.bytes), Data(signed.id.bytes), Data(signed.operation.conversation.bytes),
                Data(descriptor.encoding), part.mimeType,
            ])
        }
    }

    /// Fills the table from the operations held (migration v8, on a store written before it
    /// existed): a scan of the message operations with content, one at a time.
    static func fill(_ db: Database) throws {
        let rows = try Row.fetchCursor(db, sql: "SELECT id, wire FROM operation WHERE kind = 10")
        while let row = try rows.next() { try add(try OperationLog.decodeOperation(row), in: db) }
    }

    // MARK: - Reading

    /// Of `roots`, those a held message refers to.
    static func referenced(_ roots: [ContentRoot], in db: Database) throws -> Set<ContentRoot> {
        let statement = try db.cachedStatement(sql: "SELECT 1 FROM content_reference WHERE root = ? LIMIT 1")
        var found: Set<ContentRoot> = []
        for root in roots where try Bool.fetchOne(statement, arguments: [Data(root.bytes)]) != nil {
            found.insert(root)
        }
        return found
    }

    /// Up to `limit` roots after `root` (from the first if nil), in byte order, each with the
    /// messages that refer to it.
    static func page(after root: ContentRoot?, limit: Int, in db: Database) throws -> [ContentReference] {
        let roots = try Data.fetchAll(
            db.cachedStatement(sql: "SELECT DISTINCT root FROM content_reference WHERE root > ? ORDER BY root LIMIT ?"),
            arguments: [Data(root?.bytes ?? []), limit])
        let statement = try db.cachedStatement(sql: """
            SELECT descriptor, conversation, mimeType FROM content_reference WHERE root = ? ORDER BY operation
            """)
        return try roots.compactMap { key in
            var reference: ContentReference?
            let rows = try Row.fetchCursor(statement, arguments: [key])
            while let row = try rows.next() {
                let descriptor: ContentDescriptor
                do {
                    descriptor = try ContentDescriptor(encoding: [UInt8](try row.blob(0, "content_reference.descriptor")))
                } catch {
                    throw StoreError.damaged("content_reference.descriptor", "does not decode: \(error)")
                }
                guard descriptor.root.bytes == [UInt8](key) else {
                    throw StoreError.damaged("content_reference.descriptor", "names another root than its row")
                }
                let use = ContentReference.Use(
                    descriptor: descriptor, conversation: try row.conversationID(1, "content_reference.conversation"),
                    mimeType: try row.text(2, "content_reference.mimeType"))
                if reference == nil { reference = ContentReference(root: descriptor.root, uses: []) }
                reference?.uses.append(use)
            }
            // One read: the root's rows are there (the page found it); nil only if not.
            return reference
        }
    }
}

/// A content that held messages refer to (`Store.contentReferences(after:limit:)`).
public struct ContentReference: Sendable, Hashable {
    /// One message part naming the content.
    public struct Use: Sendable, Hashable {
        /// The part's descriptor (every use names `root`; a liar's may give another size).
        public var descriptor: ContentDescriptor
        /// The log of the message.
        public var conversation: ConversationID
        /// The part's MIME type.
        public var mimeType: String
    }

    public var root: ContentRoot
    /// The parts naming it, in the order of their messages' identifiers; at least one.
    public var uses: [Use]
}
