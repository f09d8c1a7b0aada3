import Foundation
import GRDB
import WeftModel

// Acknowledgements by slot (SPEC.md §14.7): a peer's STORED names the operations it stored as
// ranges of (conversation, author, sequence), operations this node sent it, so this node holds
// them. Only the local user's messages in the outbox have anything to learn from them: they are
// now sent. The store maps the slots back to those messages, exactly: a slot where it holds
// another operation too (a fork, §13.1) names neither.
extension Store {
    /// A peer acknowledged storing the operations in these slots: the local user's messages
    /// among them that wait in the outbox (or failed) are sent, in one transaction. Returns the
    /// messages that became sent.
    @discardableResult
    public func markSent(acknowledged ranges: [SlotRange]) async throws -> [OperationID] {
        try await markSent(among: try unsentMessages(acknowledgedIn: ranges))
    }

    /// The local user's messages not sent yet (waiting, or failed) whose operations lie in
    /// `ranges`, leaving out any whose slot holds another operation here too.
    public func unsentMessages(acknowledgedIn ranges: [SlotRange]) throws -> [OperationID] {
        let own = Dictionary(grouping: ranges.filter { $0.author == localUser }, by: \.conversation)
        guard !own.isEmpty else { return [] }
        return try database.read { db in
            // The unsent entries, through the outbox's state index: few (sent ones stay, left out).
            let rows = try Row.fetchAll(db.cached("""
                SELECT operation.id, operation.conversation, operation.sequence, operation.status
                FROM outbox JOIN operation ON operation.id = outbox.message
                WHERE outbox.state IN ('waiting', 'failed')
                """))
            var messages: [OperationID] = []
            for row in rows {
                let conversation = try row.conversationID(1, "operation.conversation")
                let sequence = UInt64(bitPattern: row[2])
                guard let runs = own[conversation], runs.contains(where: { $0.sequences.contains(sequence) }) else { continue }
                let message = try row.operationID(0, "operation.id")
                guard try !Self.slotHoldsAnother(
                    than: message, conversation: conversation, author: localUser, sequence: sequence,
                    isAccepted: (row[3] as String) == "accepted", in: db)
                else { continue }
                messages.append(message)
            }
            return messages
        }
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
