import Foundation
import GRDB
import WeftModel

// Retention (SPEC.md §13.8): a node keeps the conversations of its own user for good, and
// relays the others for a retention period (the node's configuration, 30 days by default),
// then prunes them, keeping only their summaries as tombstones.
extension OperationLog {
    /// `Store.pruneRelayed(olderThan:)`: deletes the relayed logs whose group's last activity
    /// is older than `wallMilliseconds`, leaving their summaries as tombstones; returns how many.
    func pruneRelayed(olderThan wallMilliseconds: UInt64) async throws -> Int {
        let localUser = self.localUser
        let cutoff = HLCTimestamp(milliseconds: wallMilliseconds, counter: 0).databaseValue
        return try await transactions.write { db in
            let old = Set(try Data.fetchAll(
                db.cached("SELECT conversation FROM log_summary WHERE isPruned = 0 AND lastActivity < ?"), arguments: [cutoff]
            ).map { try WeftStore.Stored.conversationID($0, "log_summary.conversation") })
            // Logs the local user wrote in are theirs: not even worth replaying.
            let written = Set(try Data.fetchAll(
                db.cached("SELECT DISTINCT conversation FROM operation WHERE author = ?"), arguments: [Data(localUser.bytes)]
            ).map { try WeftStore.Stored.conversationID($0, "operation.conversation") })
            var candidates = old.subtracting(written)
            var pruned: [ConversationID] = []
            while let next = candidates.first {
                let replica = try Self.groupReplica(for: [next], localUser: localUser, in: db)
                let group = Self.members(of: next, in: replica)
                candidates.subtract(group)
                // The whole group goes, or none of it: it shows as one conversation.
                guard group.allSatisfy(old.contains), !group.contains(where: written.contains),
                    !replica.everAdded(localUser, inGroupOf: next)
                else { continue }
                try Self.deleteLogs(group, in: db)
                pruned += group
            }
            guard !pruned.isEmpty else { return (0, Publication()) }
            // The replica in memory knows their creations: it is rebuilt from what is left.
            self.forgetReplica()
            // Never shown (SPEC.md §14.9), so readers see no deletion: only the summaries change.
            let summaries = try LogSummaryTable(db: db).summaries(of: pruned.sorted())
            return (pruned.count, Publication(stored: StoredRecord(summaries: summaries)))
        }
    }

    /// The logs of the merge group of `id` (itself alone if it has none).
    private static func members(of id: ConversationID, in replica: Replica) -> [ConversationID] {
        guard let snapshot = replica.conversation(id) else { return [id] }
        return Array(Set([id, snapshot.id] + snapshot.mergedIDs)).sorted()
    }

    /// Deletes the operations and rows of `logs`, leaving their summaries as tombstones.
    private static func deleteLogs(_ logs: [ConversationID], in db: Database) throws {
        for log in logs {
            let key = Data(log.bytes)
            try db.execute(sql: "DELETE FROM message WHERE conversation = ? OR postedTo = ?", arguments: [key, key])
            try db.execute(sql: "DELETE FROM conversation WHERE id = ?", arguments: [key])
            try db.execute(sql: "DELETE FROM operation WHERE conversation = ?", arguments: [key])
            try db.execute(sql: "UPDATE log_summary SET isPruned = 1 WHERE conversation = ?", arguments: [key])
        }
    }
}
