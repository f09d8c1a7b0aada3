import Foundation
import GRDB
import WeftModel

// Applying operations received from peers: one transaction through the replica
// (`OperationLog.writeThroughReplica`) that spans the seams: the log rows and pending bounds,
// the local user's delivered receipts (`Store+Delivery.swift`), the materialized rows, the
// delivery failures shown, the outbox's waiting messages, and the log summaries.
extension Store {
    /// An operation refused on receipt, before the merge rules: a bad signature, or a timestamp
    /// too far ahead of the wall clock (the peer may offer it again later). Not stored.
    public struct Refusal: Sendable, Hashable {
        public var operation: OperationID
        public var error: OperationError
    }

    /// What a write did.
    public struct Applied: Sendable {
        /// What the merge rules did with each operation (accepted, pending, rejected, duplicate).
        public var report: Replica.Report
        /// Operations refused on receipt (signatures, clocks), and received operations that would
        /// wait for causes past the store's bounds (`OperationError.Reason.pendingLimit`, not
        /// stored); always empty for local writes.
        public var refused: [Refusal]
        /// What readers see change (the delivered receipts written with it included).
        public var changes: ChangeSet
        /// The local user's delivered receipts written in the same commit (`LocalAuthor.receive`).
        public var acknowledgements: [SignedOperation] = []
        /// Received operations stored for the first time (each counted once), in batch order.
        public var newOperations: [OperationID] = []
        /// Received operations the store held already (in any status), or that repeat one
        /// earlier in the batch; refused ones are in `refused` instead.
        public var duplicateCount = 0
        /// Received operations (new or not) that wait for causes after this commit.
        public var pendingCount = 0
        /// Operations that waited for causes before this commit and that it deleted, to keep
        /// their log within `Store.pendingLimit` or because they are stamped longer ago than
        /// `Store.pendingLifetime`: replication counts them released from pending. Their logs'
        /// new summaries are in `summaries`.
        public var droppedPending: [OperationID] = []
        /// The new summary of every log this commit stored operations in, published, or deleted
        /// pending operations from (`CommittedChanges.summaries`); a log left holding nothing has
        /// `operationCount` 0 and is unpublished.
        public var summaries: [LogSummary] = []
        /// What this commit made available to the mesh (`CommittedChanges.storedOperations`).
        public var storedOperations: [SignedOperation] = []
        /// What the removal rule is told after this commit (`CommittedChanges.memberships`).
        public var memberships: [LogMembership] = []

        /// How many received operations were stored for the first time.
        public var newCount: Int { newOperations.count }
    }

    /// Stores operations received from peers *as they are*: it writes no receipts. A node
    /// applies what it receives through `LocalAuthor.receive(_:)`, which also acknowledges the
    /// delivery of new messages in the same commit; this is for tools, tests and benchmarks.
    ///
    /// Verifies signatures in parallel over the cores (outside the writer), refuses bad
    /// signatures and timestamps more than `futureTolerance` ahead of `wallMilliseconds`,
    /// applies the rest to the replica, and writes in one transaction the operation log
    /// (accepted, pending, rejected with its reason) and the rows of every conversation and
    /// message that changed.
    public func apply(received operations: [SignedOperation], wallMilliseconds: UInt64) async throws -> Applied {
        let batch = try await checkSignatures(operations)
        return try await apply(received: batch, wallMilliseconds: wallMilliseconds, acknowledgingWith: nil)
    }

    /// Received operations whose signatures have been checked (`checkSignatures(_:)`), ready
    /// for `apply(received:wallMilliseconds:)`.
    ///
    /// Checking is the expensive part of accepting an operation and runs outside the writer:
    /// a node checks the next batch while the store writes the one before it.
    public struct CheckedBatch: Sendable {
        public let operations: [SignedOperation]
        /// Per operation, whether its signature verifies.
        let valid: [Bool]
    }

    /// `apply(received:wallMilliseconds:)` for operations checked beforehand.
    public func apply(received batch: CheckedBatch, wallMilliseconds: UInt64) async throws -> Applied {
        try await apply(received: batch, wallMilliseconds: wallMilliseconds, acknowledgingWith: nil)
    }

    /// Applies received operations checked beforehand; with `signer`, also the local user's
    /// delivered receipts for the new messages addressed to them, in the same transaction
    /// (`Store+Delivery`).
    ///
    /// `completeChanges` false: a caller that does not read `Applied.changes` (a node's
    /// storer) lets the commit skip reading back the messages it only updates (receipts) while
    /// no subscriber reads messages either (`changes(includingMessages:)`); their snapshots then
    /// come without parts.
    func apply(
        received batch: CheckedBatch, wallMilliseconds: UInt64, acknowledgingWith signer: LocalSigner?,
        completeChanges: Bool = true
    ) async throws -> Applied {
        let operations = batch.operations
        let valid = batch.valid
        let (horizon, overflow) = wallMilliseconds.addingReportingOverflow(futureTolerance)
        let latest = overflow ? UInt64.max : horizon

        var refused: [Refusal] = []
        var verified: [SignedOperation] = []
        verified.reserveCapacity(operations.count)
        for (index, signed) in operations.enumerated() {
            if !valid[index] {
                refused.append(Refusal(
                    operation: signed.id,
                    error: OperationError(.badSignature, "the signature of \(signed.id) does not verify with its author's key")))
            } else if signed.operation.timestamp.milliseconds > latest {
                refused.append(Refusal(
                    operation: signed.id,
                    error: OperationError(
                        .timestampInFuture,
                        "\(signed.id) is stamped \(signed.operation.timestamp.milliseconds - wallMilliseconds) ms ahead of this node's clock (the limit is \(futureTolerance) ms)"
                    )))
            } else {
                verified.append(signed)
            }
        }
        let accepted = verified
        let refusals = refused
        let localUser = self.localUser
        let (earliest, underflow) = wallMilliseconds.subtractingReportingOverflow(pendingLifetime)
        let pendingCutoff = HLCTimestamp(milliseconds: underflow ? 0 : earliest, counter: 0)
        let pendingLimit = self.pendingLimit
        return try await operationLog.writeThroughReplica { db, lease in
            try OperationLog.loadLogs(lease.replica.logsToLoad(for: accepted), into: &lease.replica, in: db)
            let current = CurrentSnapshots(db: db)
            try current.prefetch(Set(accepted.map(\.operation.conversation)))
            let (decided, changes) = lease.apply(accepted, current: current.read)
            try current.check()
            // No Materializer outlives its use: one holding the replica while the receipts
            // change it would make the replica copy the logs they touch. The log rows say
            // which operations the store held already (for the summaries).
            let held = try Materializer(db: db, replica: lease.replica, localUser: localUser).writeLog(batch: accepted, report: decided)
            // Waiting operations past the bounds go before anything counts them stored.
            var report = decided
            let drops = try OperationLog.boundPending(
                report: &report, batch: accepted, held: held, cutoff: pendingCutoff, limit: pendingLimit, lease: &lease, in: db)
            var applied = Applied(report: report, refused: refusals + drops.refused, changes: changes)
            if let signer {
                try Self.acknowledgeDelivery(in: &applied, lease: &lease, db: db, localUser: localUser, signer: signer)
            }
            // The partial replica keeps no message parts: the change set gets them from the
            // batch or the log, once the receipts (if any) have changed the snapshots too.
            let withMessages = completeChanges || self.changeBus.wantMessages
            try OperationLog.fillParts(of: &applied.changes, from: accepted, includingUpdated: withMessages, in: db)
            // The rows follow the replica the receipts (if any) left.
            try Materializer(db: db, replica: lease.replica, localUser: localUser).materialize(applied.changes)
            applied.changes = try DeliveryFailures.withDeliveryFailures(applied.changes, localUser: localUser, in: db)
            let waiting = try self.outgoing.waitingMessages(among: applied.changes, in: db)
            // Received operations are published: their logs have left some node already.
            let new = LogSummaries.firstStored(accepted, report: report, held: held)
            var stored = try LogSummaries.recordStored(new + applied.acknowledgements, publishing: Set(new.map(\.operation.conversation)), in: db)
            if !drops.logs.isEmpty {
                let summarized = Set(stored.summaries.map(\.conversation))
                stored.summaries = (stored.summaries + (try LogSummaries.summaries(of: drops.logs.subtracting(summarized), in: db)))
                    .sorted { $0.conversation < $1.conversation }
            }
            let refusedNow = Set(drops.refused.map(\.operation))
            applied.record(received: new, of: accepted.count(where: { !refusedNow.contains($0.id) }), report: report, stored: stored)
            applied.droppedPending = drops.dropped
            applied.memberships = LogSummaries.membershipChanges(accepted, report: report, replica: lease.replica)
            stored.memberships = applied.memberships
            OperationLog.trim(&lease.replica, keeping: Set(accepted.map(\.operation.conversation)), limit: cachedOperationLimit)
            return (applied, Publication(changes: applied.changes, waitingMessages: waiting, stored: stored, includesMessages: withMessages))
        }
    }
}
