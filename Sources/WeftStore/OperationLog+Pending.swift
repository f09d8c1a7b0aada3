import Foundation
import GRDB
import WeftModel

// Pending operations (SPEC.md §11.1): an operation whose causes have not arrived waits in the
// operation table with status 'pending' (and in the replica while its log is in memory). A peer
// can make up causes that never come, so the store bounds them:
// - an operation stamped more than `Store.pendingLifetime` before the wall clock does not wait: the
//   sweep (`expirePending(olderThan:)`) deletes those held, and a commit deletes those it would
//   leave waiting. Its own timestamp, not when it arrived, so that every node lets the same
//   operation go at about the same time and none takes it back from another (an age counted
//   from arrival would start again each time reconciliation brought it back);
// - a log holds at most `Store.pendingLimit` of them: a commit that leaves more deletes the oldest
//   (by timestamp, then identifier, the same on every node holding the same ones).
// A deleted operation is as if never received: what waits for it waits on, and it is taken
// again when offered again (accepted if its causes are held by then; waiting again if it is
// within the bounds). Deleting costs the operations deleted (a few index lookups each) and,
// only where one held a slot at or below its author's head, that author's other operations in
// the log that are not accepted: never the whole log (`LogSummaryTable.remove`).
extension OperationLog {
    /// `Store.expirePending(olderThan:)`: deletes the pending operations stamped before
    /// `wallMilliseconds`, in one transaction, and returns them.
    func expirePending(olderThan wallMilliseconds: UInt64) async throws -> [OperationID] {
        let cutoff = HLCTimestamp(milliseconds: wallMilliseconds, counter: 0).databaseValue
        let cachedOperationLimit = self.cachedOperationLimit
        return try await writeThroughReplica { db, lease in
            var expired: [OperationID] = []
            var logs: Set<ConversationID> = []
            let rows = try Row.fetchCursor(
                db.cachedStatement(sql: "SELECT id, conversation FROM operation WHERE status = 'pending' AND timestamp < ?"),
                arguments: [cutoff])
            while let row = try rows.next() {
                expired.append(try row.operationID(0, "operation.id"))
                logs.insert(try row.conversationID(1, "operation.conversation"))
            }
            guard !expired.isEmpty else { return ([], Publication()) }
            // A log's accepted operations tell what the deletions do to its heads.
            try Self.loadLogs(logs.filter { !lease.replica.isLoaded($0) }, into: &lease.replica, in: db)
            let deletion = try Self.deletePending(expired, lease: &lease, in: db)
            let summaries = try LogSummaries.summaries(of: deletion.logs, in: db)
            Self.trim(&lease.replica, keeping: [], limit: cachedOperationLimit)
            return (deletion.ids, Publication(stored: StoredRecord(summaries: summaries)))
        }
    }

    // MARK: - In a commit of received operations

    /// What a commit of received operations deleted of the pending ones.
    struct PendingDrops {
        /// Operations of the batch the store did not hold before, deleted at once: refused.
        var refused: [Store.Refusal] = []
        /// Operations held pending before the commit, deleted by it.
        var dropped: [OperationID] = []
        /// The logs whose summaries the deletions changed.
        var logs: Set<ConversationID> = []
    }

    /// Inside a commit of received operations, once their rows are written (`held`: those of
    /// `batch` the table held before): deletes the operations the commit leaves waiting that are
    /// stamped before `cutoff`, then the oldest pending operations of each log the commit left
    /// operations waiting in that now holds more than `limit`; takes them out of `report`.
    /// Costs what it deletes, and nothing when the commit leaves nothing waiting.
    static func boundPending(
        report: inout Replica.Report, batch: [SignedOperation], held: Set<OperationID>, cutoff: HLCTimestamp, limit: Int,
        lease: inout ReplicaLease, in db: Database
    ) throws -> PendingDrops {
        guard !report.pending.isEmpty else { return PendingDrops() }
        let new = Set(batch.lazy.map(\.id).filter { !held.contains($0) })
        var logs: Set<ConversationID> = []
        var old: [OperationID] = []
        for id in report.pending {
            guard let signed = lease.replica.pendingOperation(id) else { continue }
            logs.insert(signed.operation.conversation)
            if signed.operation.timestamp < cutoff { old.append(id) }
        }
        var deleted = try deletePending(old, unsummarized: new, lease: &lease, in: db)
        var crowded: [OperationID] = []
        for log in logs.sorted() {
            let excess = lease.replica.pendingCount(in: log) - limit
            guard excess > 0 else { continue }
            for data in try Data.fetchAll(
                db.cachedStatement(sql: "SELECT id FROM operation WHERE conversation = ? AND status = 'pending' ORDER BY timestamp, id LIMIT ?"),
                arguments: [Data(log.bytes), excess])
            {
                crowded.append(try Stored.operationID(data, "operation.id"))
            }
        }
        let more = try deletePending(crowded, unsummarized: new, lease: &lease, in: db)
        let tooOld = Set(deleted.ids)
        deleted.ids += more.ids
        deleted.logs.formUnion(more.logs)

        var drops = PendingDrops(logs: deleted.logs)
        for id in deleted.ids {
            if new.contains(id) {
                drops.refused.append(Store.Refusal(
                    operation: id,
                    error: OperationError(
                        .pendingLimit,
                        tooOld.contains(id)
                            ? "\(id) waits for causes this node does not hold, and is stamped before \(cutoff.milliseconds) ms, longer ago than operations may wait"
                            : "\(id) waits for causes this node does not hold, and its log holds \(limit) such operations, all newer")))
            } else {
                drops.dropped.append(id)
            }
        }
        let gone = Set(deleted.ids)
        report.pending.removeAll { gone.contains($0) }
        for id in gone { report.missingCauses[id] = nil }
        return drops
    }

    // MARK: - Deleting

    /// Pending operations deleted, and the logs whose summaries that changed (an operation
    /// stored by the same transaction and deleted at once changes none).
    struct PendingDeletion {
        var ids: [OperationID] = []
        var logs: Set<ConversationID> = []
    }

    /// Deletes pending operations of logs in memory: their rows, their place in the replica and,
    /// for those the summaries count (all but `unsummarized`: stored by this transaction, not
    /// yet added), their share of their logs' summaries. Identifiers not pending are skipped.
    static func deletePending(
        _ ids: [OperationID], unsummarized: Set<OperationID> = [], lease: inout ReplicaLease, in db: Database
    ) throws -> PendingDeletion {
        guard !ids.isEmpty else { return PendingDeletion() }
        let delete = try db.cachedStatement(
            sql: "DELETE FROM operation WHERE id = ? AND status = 'pending' RETURNING conversation, author, sequence, timestamp")
        var deletion = PendingDeletion()
        var counted: [LogSummaryTable.Stored] = []
        for id in ids {
            guard let row = try Row.fetchOne(delete, arguments: [Data(id.bytes)]) else { continue }
            let conversation = try row.conversationID(0, "operation.conversation")
            // The identifiers come from the replica's pending operations, so their logs are in
            // memory; a row naming another log was changed on disk.
            guard lease.replica.isLoaded(conversation) else {
                throw StoreError.damaged("operation.conversation", "names a log whose pending operations are not in memory")
            }
            deletion.ids.append(id)
            guard !unsummarized.contains(id) else { continue }
            deletion.logs.insert(conversation)
            counted.append(LogSummaryTable.Stored(
                id: id, conversation: conversation, author: try row.userID(1, "operation.author"),
                sequence: UInt64(bitPattern: try row.integer(2, "operation.sequence")),
                timestamp: HLCTimestamp(databaseValue: try row.integer(3, "operation.timestamp"))))
        }
        lease.dropPending(deletion.ids)
        let replica = lease.replica
        try LogSummaryTable(db: db).remove(
            counted,
            // Accepted operations of an author are a prefix of their chain (SPEC.md §13.1:
            // each follows the previous in its causal past, which is accepted too).
            acceptedThrough: { log, author in replica.nextSequence(for: author, in: log) - 1 },
            latestAccepted: { replica.latestTimestamp(in: $0) })
        return deletion
    }
}
