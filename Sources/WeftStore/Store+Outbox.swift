import Foundation
import GRDB
import WeftModel

// The outbox: messages accepted for sending, kept until the mesh has them or they fail. Entries
// are written with their messages by `commitLocal`, in the same transaction.
extension Store {
    /// Entries still waiting to be sent (neither sent nor failed), oldest first.
    public func outbox() throws -> [OutboxEntry] {
        try database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT message, conversation, createdAt, expiresAt, attempts, state, reason FROM outbox
                WHERE state = 'waiting' ORDER BY createdAt, message
                """).map(OutboxEntry.init(row:))
        }
    }

    /// Every entry, whatever its state, oldest first.
    public func outboxEntries() throws -> [OutboxEntry] {
        try database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT message, conversation, createdAt, expiresAt, attempts, state, reason FROM outbox
                ORDER BY createdAt, message
                """).map(OutboxEntry.init(row:))
        }
    }

    /// The mesh has the message: it leaves the outbox.
    public func markSent(_ message: OperationID) throws {
        try setState(of: message, to: .sent)
    }

    /// The message failed for good, with the reason (one line, for the sender's callback).
    public func markFailed(_ message: OperationID, reason: String) throws {
        try setState(of: message, to: .failed(reason: reason))
    }

    /// Counts one more attempt to send the message.
    public func recordAttempt(_ message: OperationID) throws {
        try database.write { db in
            try db.execute(sql: "UPDATE outbox SET attempts = attempts + 1 WHERE message = ?", arguments: [Data(message.bytes)])
            guard db.changesCount == 1 else { throw Self.unknownEntry(message) }
        }
    }

    /// Fails every waiting entry whose time to live ran out by `wallMilliseconds`, and returns them.
    public func expireOutbox(wallMilliseconds: UInt64) throws -> [OutboxEntry] {
        try database.write { db in
            let now = Int64(clamping: wallMilliseconds)
            let expired = try Row.fetchAll(db, sql: """
                SELECT message, conversation, createdAt, expiresAt, attempts, state, reason FROM outbox
                WHERE state = 'waiting' AND expiresAt <= ? ORDER BY createdAt, message
                """, arguments: [now]).map(OutboxEntry.init(row:))
            let reason = "its time to live ran out before a peer took it"
            try db.execute(
                sql: "UPDATE outbox SET state = 'failed', reason = ? WHERE state = 'waiting' AND expiresAt <= ?",
                arguments: [reason, now])
            return expired.map { var entry = $0; entry.state = .failed(reason: reason); return entry }
        }
    }

    private func setState(of message: OperationID, to state: OutboxEntry.State) throws {
        try database.write { db in
            try db.execute(
                sql: "UPDATE outbox SET state = ?, reason = ? WHERE message = ?",
                arguments: [state.column, state.reason, Data(message.bytes)])
            guard db.changesCount == 1 else { throw Self.unknownEntry(message) }
        }
    }

    private static func unknownEntry(_ message: OperationID) -> StoreError {
        StoreError(.unknownOutboxEntry, "the outbox has no entry for message \(message)")
    }
}

extension OutboxEntry {
    init(row: Row) {
        let state: State =
            switch row[5] as String {
            case "sent": .sent
            case "failed": .failed(reason: row[6] ?? "")
            default: .waiting
            }
        self.init(
            message: OperationID(bytes: [UInt8](row[0] as Data))!, conversation: ConversationID(bytes: [UInt8](row[1] as Data))!,
            createdAt: UInt64(clamping: row[2] as Int64), timeToLive: 0, attempts: row[4], state: state)
        expiresAt = UInt64(clamping: row[3] as Int64)
    }
}
