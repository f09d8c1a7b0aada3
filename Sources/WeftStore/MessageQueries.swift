import Foundation
import GRDB
import WeftModel

/// Message queries: reading the materialized messages (`message`, `part`, `receipt` tables, and
/// the local user's delivery failures over them), from SQLite and never from the replica. Owns
/// message snapshots (`MessageQueries+Snapshots.swift`: parts, statuses and positions, which are
/// computed, not stored), queries and counts, and the pages read from a conversation's end.
///
/// Each read comes twice, as in `Store+Replication.swift`: `fetch…`, async, and the synchronous
/// one, which blocks the calling thread.
struct MessageQueries: Sendable {
    let database: any DatabaseWriter

    /// One message, by identifier, in its canonical conversation.
    func fetchMessage(_ id: OperationID) async throws -> MessageSnapshot? {
        try await database.read { db in try Self.message(id, in: db) }
    }

    /// The bytes of part `index` of `message`, read from its operation in the log (a page of
    /// messages leaves larger parts' bytes there); nil if there is no such message or part.
    func fetchPartData(of message: OperationID, index: Int) async throws -> [UInt8]? {
        try await database.read { db in
            guard try Data.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM operation WHERE id = ?"), arguments: [Data(message.bytes)]) != nil
            else { return nil }
            let parts = try OperationLog.storedParts(of: message, in: db)
            return parts.indices.contains(index) ? parts[index].data : nil
        }
    }

    /// `fetchMessage(_:)`, blocking the calling thread.
    func message(_ id: OperationID) throws -> MessageSnapshot? {
        try database.read { db in try Self.message(id, in: db) }
    }

    /// Messages matching `query`, with their positions computed (`Store.fetchMessages(_:)`).
    func fetchMessages(_ query: MessageQuery) async throws -> [MessageSnapshot] {
        try await database.read { db in try Self.messages(query, in: db) }
    }

    /// `fetchMessages(_:)`, blocking the calling thread.
    func messages(_ query: MessageQuery) throws -> [MessageSnapshot] {
        try database.read { db in try Self.messages(query, in: db) }
    }

    private static func messages(_ query: MessageQuery, in db: Database) throws -> [MessageSnapshot] {
        if let page = try pageFromTheEnd(query, in: db) { return page }
        let sql = try QueryTranslation.select(query, columns: columns, in: db)
        let rows = try Row.fetchAll(db, sql: sql.text, arguments: sql.arguments)
        // Latest-first queries find their positions faster counting from the end.
        let fromEnd = query.sort.first.map { !$0.ascending && ($0.property == .sentAt || $0.property == .position) } ?? false
        return try messages(rows: rows, countingFromEnd: fromEnd, firstPosition: firstPosition(of: query), in: db)
    }

    /// A page of one conversation in position order that lies in the conversation's second
    /// half, read backwards from the end: SQLite steps over every row an OFFSET skips, so the
    /// last page of a long conversation cost a walk through all of it (a client polling its
    /// latest message paid that on every poll). Nil for any other query.
    private static func pageFromTheEnd(_ query: MessageQuery, in db: Database) throws -> [MessageSnapshot]? {
        guard let first = firstPosition(of: query), let limit = query.limit, case .conversation(let id) = query.predicates[0].value,
            let total = try Int.fetchOne(
                db.cached("SELECT messageCount FROM conversation WHERE id = (SELECT canonical FROM conversation WHERE id = ?)"),
                arguments: [Data(id.bytes)]),
            first > total / 2
        else { return nil }
        let count = min(limit, total - first)
        guard count > 0 else { return [] }
        var backwards = query
        backwards.sort = [MessageSort(.position, ascending: false)]
        backwards.offset = total - first - count
        backwards.limit = count
        let sql = try QueryTranslation.select(backwards, columns: columns, in: db)
        let rows = try Row.fetchAll(db, sql: sql.text, arguments: sql.arguments)
        return try messages(rows: rows.reversed(), countingFromEnd: false, firstPosition: first, in: db)
    }

    /// The position of the first row `query` returns when the query says it: a page of one
    /// conversation in position order starts at its offset, and counting the messages before
    /// it (a scan of the conversation up to the page) is not needed. Nil otherwise.
    static func firstPosition(of query: MessageQuery) -> Int? {
        guard let first = query.sort.first, first.property == .position, first.ascending, query.predicates.count == 1,
            query.predicates[0].property == .conversation, query.predicates[0].operator == .equal
        else { return nil }
        return query.offset
    }

    /// How many messages `query` returns (its offset and limit applied).
    func fetchCount(_ query: MessageQuery) async throws -> Int {
        try await database.read { db in try Self.count(query, in: db) }
    }

    /// `fetchCount(_:)`, blocking the calling thread.
    func count(_ query: MessageQuery) throws -> Int {
        try database.read { db in try Self.count(query, in: db) }
    }

    private static func count(_ query: MessageQuery, in db: Database) throws -> Int {
        let sql = try QueryTranslation.count(query, in: db)
        let total = try Int.fetchOne(db, sql: sql.text, arguments: sql.arguments) ?? 0
        return QueryTranslation.window(total, query.offset, query.limit)
    }
}
