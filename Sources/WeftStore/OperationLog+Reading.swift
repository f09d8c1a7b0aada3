import Foundation
import GRDB
import WeftModel

// What the log gives back: operations for replication (what a peer lacks, or asks for by
// identifier) and for tools. Each read comes twice, as everywhere in the store: `fetch…`,
// async, and the synchronous one, which blocks the calling thread (`Store+Replication.swift`).
extension OperationLog {
    /// `Store.fetchOperations(in:beyond:limit:)`: what a peer whose heads are `beyond` lacks.
    func fetchOperations(in conversation: ConversationID, beyond: VersionVector, limit: Int) async throws -> [SignedOperation] {
        guard limit > 0 else { return [] }
        return try await database.read { db in try Self.operations(in: conversation, beyond: beyond, limit: limit, in: db) }
    }

    /// `fetchOperations(in:beyond:limit:)`, blocking the calling thread.
    func operations(in conversation: ConversationID, beyond: VersionVector, limit: Int) throws -> [SignedOperation] {
        guard limit > 0 else { return [] }
        return try database.read { db in try Self.operations(in: conversation, beyond: beyond, limit: limit, in: db) }
    }

    private static func operations(
        in conversation: ConversationID, beyond: VersionVector, limit: Int, in db: Database
    ) throws -> [SignedOperation] {
        // The peer's heads as a table joined by author; sequence numbers are stored as their
        // bit pattern, so those of 2^63 and more read negative and count as above any head.
        let entries = beyond.entries.sorted { $0.key < $1.key }
        var arguments: [any DatabaseValueConvertible] = []
        for (author, head) in entries { arguments += [Data(author.bytes), Int64(clamping: head)] }
        let heads = entries.isEmpty
            ? "SELECT NULL, 0 WHERE 0" : "VALUES " + Array(repeating: "(?, ?)", count: entries.count).joined(separator: ", ")
        arguments += [Data(conversation.bytes), limit]
        let rows = try Row.fetchCursor(
            db,
            sql: """
                WITH beyond(author, head) AS (\(heads))
                SELECT o.id, o.wire FROM operation o LEFT JOIN beyond b ON b.author = o.author
                WHERE o.conversation = ? AND o.status != 'pending' AND (o.sequence < 0 OR o.sequence > COALESCE(b.head, 0))
                ORDER BY o.appliedOrder LIMIT ?
                """,
            arguments: StatementArguments(arguments))
        var operations: [SignedOperation] = []
        while let row = try rows.next() { operations.append(try decodeOperation(row)) }
        return operations
    }

    /// `Store.fetchOperations(ids:)`: held operations by identifier, in the order asked.
    func fetchOperations(ids: [OperationID]) async throws -> [SignedOperation] {
        try await database.read { db in try Self.operations(ids: ids, in: db) }
    }

    /// `fetchOperations(ids:)`, blocking the calling thread.
    func operations(ids: [OperationID]) throws -> [SignedOperation] {
        try database.read { db in try Self.operations(ids: ids, in: db) }
    }

    private static func operations(ids: [OperationID], in db: Database) throws -> [SignedOperation] {
        var found: [OperationID: SignedOperation] = [:]
        for chunk in ids.chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try Row.fetchAll(
                db.cached("SELECT id, wire FROM operation WHERE status != 'pending' AND id IN (\(marks))"), arguments: StatementArguments(chunk.map { Data($0.bytes) }))
            {
                let signed = try decodeOperation(row)
                found[signed.id] = signed
            }
        }
        return ids.compactMap { found[$0] }
    }

    /// Every operation held of one log, in the order the store decided them.
    static func heldOperations(of conversation: ConversationID, in db: Database) throws -> [SignedOperation] {
        try Row.fetchAll(
            db.cached("SELECT id, wire FROM operation WHERE conversation = ? ORDER BY appliedOrder"), arguments: [Data(conversation.bytes)]
        ).map(decodeOperation)
    }

    /// An operation from its row's `id` and `wire` columns.
    static func decodeOperation(_ row: Row) throws -> SignedOperation {
        let id = try row.blob(0, "operation.id")
        let wire = try row.blob(1, "operation.wire")
        do {
            return try SignedOperation(wireBytes: [UInt8](wire), claimedID: OperationID(bytes: [UInt8](id)))
        } catch {
            throw StoreError(.damagedLog, "operation \(id.hexPrefix) in the log does not decode: \(error)")
        }
    }

    /// `Store.operations(in:)`: the accepted operations of one log, in the order applied.
    func operations(in conversation: ConversationID) throws -> [SignedOperation] {
        try database.read { db in
            try Row.fetchAll(db.cached("""
                SELECT id, wire FROM operation WHERE conversation = ? AND status = 'accepted' ORDER BY appliedOrder
                """), arguments: [Data(conversation.bytes)]).map(Self.decodeOperation)
        }
    }

    /// How many operations the log holds with each status: accepted, pending, rejected.
    func operationCounts() throws -> (accepted: Int, pending: Int, rejected: Int) {
        try database.read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db.cached("SELECT status, COUNT(*) FROM operation GROUP BY status")) {
                counts[try row.text(0, "operation.status")] = try row.count(1, "COUNT(*) of operation")
            }
            return (counts["accepted"] ?? 0, counts["pending"] ?? 0, counts["rejected"] ?? 0)
        }
    }
}
