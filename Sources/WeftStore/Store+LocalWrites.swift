import Foundation
import GRDB
import WeftModel

// Local writes: operations the local user authored (signed by `LocalAuthor`) and the outbox
// entries of the messages among them, in one transaction through the replica that spans the
// seams: the log rows, the materialized rows, the outbox and its unsent slots, the delivery
// failures shown, and the log summaries.
extension Store {
    /// Local operations and the outbox entries for the messages among them.
    public struct LocalBatch: Sendable {
        public var operations: [SignedOperation]
        public var outbox: [OutboxEntry]
        /// Logs to publish with this batch though it posts no message in them (a conversation
        /// created announced, SPEC.md §13.7); a log is published anyway by a message posted in it.
        public var publishing: Set<ConversationID>

        public init(operations: [SignedOperation], outbox: [OutboxEntry] = [], publishing: Set<ConversationID> = []) {
            self.operations = operations
            self.outbox = outbox
            self.publishing = publishing
        }
    }

    /// Writes operations the local user authored (already signed) and outbox entries for the
    /// messages to send, in one transaction. Every operation must be accepted by the merge
    /// rules; otherwise nothing is written and the call throws (`staleLocalWrite` when it was
    /// built against an older replica, `localOperationRefused` otherwise).
    public func commitLocal(_ operations: [SignedOperation], outbox: [OutboxEntry] = []) async throws -> Applied {
        try await commitLocal { _ in LocalBatch(operations: operations, outbox: outbox) }
    }

    /// Builds local operations from the current replica and writes them, on the writer queue:
    /// concurrent local writers cannot pick the same sequence number.
    ///
    /// The replica holds the logs the batch needs: when the first build read a log that was
    /// not in memory (`Replica.logsToLoad(forBuilding:)`), the logs are loaded and `build` is
    /// called again, so `build` may run more than once (only its last batch is written). Each
    /// round loads at least one more of the store's logs, so the rounds end.
    public func commitLocal(building build: @Sendable (Replica) throws -> LocalBatch) async throws -> Applied {
        try await commitLocal { replica in (try build(replica), ()) }.applied
    }

    /// `commitLocal(building:)` whose builder also returns a value of its own (what `LocalAuthor`
    /// found while building, such as an existing distinct conversation).
    func commitLocal<Extra: Sendable>(
        building build: @Sendable (Replica) throws -> (LocalBatch, Extra)
    ) async throws -> (applied: Applied, extra: Extra) {
        let localUser = self.localUser
        return try await operationLog.writeThroughReplica { db, lease in
            var (batch, extra) = try build(lease.replica)
            while case let missing = lease.replica.logsToLoad(forBuilding: batch.operations), !missing.isEmpty {
                try OperationLog.loadLogs(missing, into: &lease.replica, in: db)
                (batch, extra) = try build(lease.replica)
            }
            // What applying needs besides (a new conversation's log: operations may wait for it).
            try OperationLog.loadLogs(lease.replica.logsToLoad(for: batch.operations), into: &lease.replica, in: db)
            try Self.checkLocal(batch, against: lease.replica, localUser: localUser)
            let current = CurrentSnapshots(db: db)
            let (report, changesWithoutParts) = lease.apply(batch.operations, current: current.read)
            var rowChanges = changesWithoutParts
            try OperationLog.fillParts(of: &rowChanges, from: batch.operations, in: db)
            try current.check()
            if let (id, error) = report.rejected.first {
                throw StoreError(.localOperationRefused, "local operation \(id) was refused: \(error)")
            }
            if !report.pending.isEmpty {
                throw StoreError(.localOperationRefused, "local operation \(report.pending[0]) names causes this store does not have")
            }
            let materializer = Materializer(db: db, replica: lease.replica, localUser: localUser)
            try materializer.write(batch: batch.operations, report: report, changes: rowChanges)
            let inserted = try materializer.insert(outbox: batch.outbox)
            try self.outgoing.noteUnsent(batch, in: db)
            let changes = try DeliveryFailures.withDeliveryFailures(rowChanges, localUser: localUser, in: db)
            let snapshots = Dictionary(changes.messages.compactMap { $0.snapshot.map { ($0.id, $0) } }, uniquingKeysWith: { _, last in last })
            var stored = try LogSummaries.recordStored(
                LogSummaries.firstStored(local: batch.operations, report: report), publishing: LogSummaries.publishing(batch), in: db)
            stored.memberships = LogSummaries.membershipChanges(batch.operations, report: report, replica: lease.replica)
            let publication = Publication(
                changes: changes,
                outbox: batch.outbox.map { OutboxChange(entry: $0, previousState: nil, message: snapshots[$0.message]) },
                waitingMessages: try self.outgoing.waitingMessages(among: changes, inserted: inserted, in: db),
                stored: stored)
            OperationLog.trim(&lease.replica, keeping: Set(batch.operations.map(\.operation.conversation)), limit: cachedOperationLimit)
            var applied = Applied(report: report, refused: [], changes: changes)
            applied.summaries = stored.summaries
            applied.storedOperations = stored.storedOperations
            applied.memberships = stored.memberships
            return ((applied, extra), publication)
        }
    }

    /// The logs a local batch needs that are not in memory: its operations' (with their merge
    /// groups) and those of the conversations its outbox entries name.
    private static func logsToLoad(for batch: LocalBatch, in replica: Replica) -> Set<ConversationID> {
        replica.logsToLoad(for: batch.operations).union(batch.outbox.map(\.conversation).filter { !replica.isLoaded($0) })
    }

    /// Refuses, before anything changes, a batch built against an older replica: its
    /// sequence numbers must continue each conversation's, in order. Applying an operation that
    /// reuses a sequence number would be an equivocation, which refuses the earlier operation too.
    private static func checkLocal(_ batch: LocalBatch, against replica: Replica, localUser: UserID) throws {
        var next: [ConversationID: UInt64] = [:]
        for signed in batch.operations {
            let op = signed.operation
            guard op.author == localUser else {
                throw StoreError(.localOperationRefused, "local operation \(signed.id) is authored by \(op.author), not the local user")
            }
            let expected = next[op.conversation] ?? replica.nextSequence(for: localUser, in: op.conversation)
            guard op.sequence == expected || replica.isKnown(signed.id, in: op.conversation) else {
                throw StoreError(
                    .staleLocalWrite,
                    "local operation \(signed.id) has sequence number \(op.sequence) in conversation \(op.conversation); the next is \(expected)")
            }
            next[op.conversation] = max(expected, op.sequence + 1)
        }
        let ids = Set(batch.operations.map(\.id))
        for entry in batch.outbox where !ids.contains(entry.message) && !replica.isKnown(entry.message, in: entry.conversation) {
            throw StoreError(.outboxWithoutMessage, "the outbox entry for \(entry.message) names no message written with it")
        }
    }
}
