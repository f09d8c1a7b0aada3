import Foundation
import GRDB
import WeftModel

// Acknowledgements by slot (SPEC.md §14.7): a peer's STORED names the operations it stored as
// ranges of (conversation, author, sequence), operations this node sent it, so this node holds
// them. Only the local user's messages in the outbox have anything to learn from them: they are
// now sent. The store maps the slots back to those messages, exactly: a slot where it holds
// another operation too (a fork, §13.1) names neither.
extension Outbox {
    /// `Store.markSent(acknowledged:)`: the local user's unsent messages in these slots are
    /// sent, in one transaction; returns the messages that became sent.
    func markSent(acknowledged ranges: [SlotRange]) async throws -> [OperationID] {
        try await markSent(among: try await fetchUnsentMessages(acknowledgedIn: ranges))
    }

    /// The local user's messages not sent yet (waiting, or failed) whose operations lie in
    /// `ranges`, leaving out any whose slot holds another operation here too.
    func fetchUnsentMessages(acknowledgedIn ranges: [SlotRange]) async throws -> [OperationID] {
        let candidates = unsentCandidates(in: ranges)
        guard !candidates.isEmpty else { return [] }
        let localUser = self.localUser
        return try await database.read { db in try Self.unsentMessages(among: candidates, localUser: localUser, in: db) }
    }

    /// `fetchUnsentMessages(acknowledgedIn:)`, blocking the calling thread.
    func unsentMessages(acknowledgedIn ranges: [SlotRange]) throws -> [OperationID] {
        let candidates = unsentCandidates(in: ranges)
        guard !candidates.isEmpty else { return [] }
        return try database.read { db in try Self.unsentMessages(among: candidates, localUser: localUser, in: db) }
    }

    /// The unsent messages `UnsentSlots` places in the local user's slots among `ranges`.
    private func unsentCandidates(in ranges: [SlotRange]) -> [UnsentSlots.Candidate] {
        let own = ranges.filter { $0.author == localUser }
        guard !own.isEmpty else { return [] }
        return unsent.withLock { $0.messages(in: own) }
    }

    /// `candidates` (sorted by log) less those whose slot holds another operation.
    private static func unsentMessages(among candidates: [UnsentSlots.Candidate], localUser: UserID, in db: Database) throws -> [OperationID] {
        var messages: [OperationID] = []
        var start = candidates.startIndex
        while start < candidates.endIndex {
            let log = candidates[start].log
            let end = candidates[start...].firstIndex { $0.log != log } ?? candidates.endIndex
            // The local user's operations in the log that are not accepted: almost always
            // none, and then no slot holds another (a slot holds one accepted operation).
            let refused = try Set(Row.fetchAll(
                db.cached("SELECT id FROM operation WHERE conversation = ? AND status IN ('pending', 'rejected') AND author = ?"),
                arguments: [Data(log.bytes), Data(localUser.bytes)]
            ).map { try $0.operationID(0, "operation.id") })
            for candidate in candidates[start..<end] {
                if !refused.isEmpty {
                    let isAccepted = !refused.contains(candidate.message)
                    guard try !slotHoldsAnother(
                        than: candidate.message, conversation: log, author: localUser, sequence: candidate.sequence,
                        isAccepted: isAccepted, in: db)
                    else { continue }
                }
                messages.append(candidate.message)
            }
            start = end
        }
        return messages
    }

    /// Notes the outbox entries of a local batch being committed in `UnsentSlots`, by the slots
    /// of their messages (read from the store for an entry whose message is not in the batch).
    func noteUnsent(_ batch: Store.LocalBatch, in db: Database) throws {
        guard !batch.outbox.isEmpty else { return }
        // Positions, not copies: copying a SignedOperation retains each of its buffers.
        var positions: [OperationID: Int] = [:]
        positions.reserveCapacity(batch.operations.count)
        for (index, signed) in batch.operations.enumerated() { positions[signed.id] = index }
        var slots: [(message: OperationID, log: ConversationID, sequence: UInt64)] = []
        slots.reserveCapacity(batch.outbox.count)
        for entry in batch.outbox {
            if let index = positions[entry.message] {
                let operation = batch.operations[index].operation
                if operation.author == localUser { slots.append((entry.message, operation.conversation, operation.sequence)) }
            } else if let row = try Row.fetchOne(
                db.cached("SELECT conversation, sequence FROM operation WHERE id = ? AND author = ?"),
                arguments: [Data(entry.message.bytes), Data(localUser.bytes)])
            {
                slots.append((
                    entry.message, try row.conversationID(0, "operation.conversation"),
                    UInt64(bitPattern: try row.integer(1, "operation.sequence"))))
            }
        }
        unsent.withLock { unsent in
            for slot in slots { unsent.insert(slot.message, log: slot.log, sequence: slot.sequence) }
        }
    }

    /// The outbox's unsent entries (waiting or failed) by slot, as the store opens.
    static func unsentSlots(in db: Database) throws -> UnsentSlots {
        var slots = UnsentSlots()
        for row in try Row.fetchAll(db, sql: """
            SELECT operation.id, operation.conversation, operation.sequence
            FROM outbox JOIN operation ON operation.id = outbox.message
            WHERE outbox.state IN ('waiting', 'failed')
            """)
        {
            slots.insert(
                try row.operationID(0, "operation.id"), log: try row.conversationID(1, "operation.conversation"),
                sequence: UInt64(bitPattern: try row.integer(2, "operation.sequence")))
        }
        return slots
    }

    /// Whether the store holds an operation other than `operation` in its slot. A slot holds at
    /// most one accepted operation (two well-formed ones fork it, and both are refused, §13.1),
    /// so besides an accepted one only pending and refused operations need looking at, which
    /// the conversation's status index finds without reading the log.
    static func slotHoldsAnother(
        than operation: OperationID, conversation: ConversationID, author: UserID, sequence: UInt64, isAccepted: Bool,
        in db: Database
    ) throws -> Bool {
        let statuses = isAccepted ? "status IN ('pending', 'rejected')" : "status IN ('accepted', 'pending', 'rejected')"
        return try Bool.fetchOne(
            db.cached("""
                SELECT EXISTS (SELECT 1 FROM operation
                WHERE conversation = ? AND \(statuses) AND author = ? AND sequence = ? AND id != ?)
                """),
            arguments: [Data(conversation.bytes), Data(author.bytes), Int64(bitPattern: sequence), Data(operation.bytes)]) ?? false
    }
}
