import GRDB

extension Database {
    /// `sql` prepared once per connection and reused. GRDB prepares a `sql:` string anew on
    /// every call, and parsing and authorizing the statements of a send was a third of a
    /// node's time. A statement whose text follows the length of a list (`IN (?, ?, …)`) is
    /// cached only for short lists, so the cache holds a bounded number of statements.
    func cached(_ sql: String) throws -> Statement {
        var placeholders = 0
        for byte in sql.utf8 where byte == UInt8(ascii: "?") { placeholders += 1 }
        return placeholders <= Self.cachedPlaceholderLimit ? try cachedStatement(sql: sql) : try makeStatement(sql: sql)
    }

    /// Statements with more placeholders than this are not cached (`cached(_:)`).
    static let cachedPlaceholderLimit = 8
}
