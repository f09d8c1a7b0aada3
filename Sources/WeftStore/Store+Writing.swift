import Foundation
import GRDB
import WeftModel

// The write path: one transaction on GRDB's writer queue (the store's lock), the replica lent
// to it, and the change batch published to subscribers once it commits, before the next write
// starts, so subscribers see commits in order.
extension Store {
    /// The replica lent to one write transaction. `isChanged` records whether the merge rules
    /// ran on it: a write that fails before then gives the replica back as it was; one that
    /// fails after leaves it to be rebuilt from the log.
    struct ReplicaLease {
        var replica: Replica
        private(set) var isChanged = false

        /// Applies `operations` and reports what changed for readers, starting from `current`:
        /// a canonical conversation's snapshot as it stands before them, if at hand (and a
        /// message's position, if at hand).
        mutating func apply(
            _ operations: [SignedOperation], current: (ConversationID) -> ConversationSnapshot?,
            position: (OperationID) -> Int? = { _ in nil }
        ) -> (Replica.Report, ChangeSet) {
            isChanged = true
            // The store shows only the local user's conversations (SPEC.md §14.9): it writes rows
            // for them alone, and relays the others from the operation log.
            return replica.applyReportingChangesIncrementally(verified: operations, current: current, position: position, onlyShown: true)
        }

        /// Forgets pending operations the transaction deletes (`Store+Pending.swift`).
        mutating func dropPending(_ ids: [OperationID]) {
            guard !ids.isEmpty else { return }
            isChanged = true
            replica.dropPending(ids)
        }

        /// Applies `operations` without working out what readers see change (the caller knows).
        mutating func applyWithoutChanges(_ operations: [SignedOperation]) -> Replica.Report {
            isChanged = true
            return replica.apply(verified: operations)
        }
    }

    /// What a committed transaction tells subscribers.
    struct Publication: Sendable {
        var changes = ChangeSet()
        var outbox: [OutboxChange] = []
        var waitingMessages: Set<OperationID> = []
        /// What the commit stored, for replication (summaries, operations to push).
        var stored = StoredRecord()
        /// False when the commit did not read back the messages it only updated (no subscriber
        /// wanted them): subscribers that want messages do not get it.
        var includesMessages = true

        var isEmpty: Bool { changes.isEmpty && outbox.isEmpty && stored.summaries.isEmpty && stored.storedOperations.isEmpty }
    }

    /// Runs `body` in one write transaction with the replica lent to it; puts the replica back
    /// and publishes the body's changes once the transaction commits.
    func writeThroughReplica<T: Sendable>(
        _ body: @Sendable (Database, inout ReplicaLease) throws -> (T, Publication)
    ) async throws -> T {
        while true {
            if state.withLock({ $0.replica == nil && !$0.lent }) { try await loadReplica() }
            do {
                return try await database.writeWithoutTransaction { db in
                    guard var lease = self.borrowReplica() else { throw ReplicaNotLoaded() }
                    let result: (T, Publication)
                    do {
                        result = try Self.inTransaction(db) { try body(db, &lease) }
                    } catch {
                        self.giveBack(lease.isChanged ? nil : lease.replica)
                        throw error
                    }
                    self.giveBack(lease.replica)
                    self.memberships.withLock { $0.committed(result.1.changes) }
                    self.subscribers.publish(result.1)
                    return result.0
                }
            } catch is ReplicaNotLoaded {
                continue  // a failed write emptied the slot after it was loaded: load it again
            }
        }
    }

    /// Runs `body` in one write transaction that does not need the replica (the outbox), and
    /// publishes its changes once it commits.
    ///
    /// `syncing: false` commits without waiting for the disk (SQLite's NORMAL instead of the
    /// store's FULL): for facts whose loss in a power cut the node redoes by itself, such as a
    /// message marked sent (it is sent again, and acknowledged again). Never for a local
    /// operation or what a peer is told was stored. The commit still survives a crash of the
    /// process, and the next syncing commit (the WAL is written in order) makes it durable too.
    func write<T: Sendable>(syncing: Bool = true, _ body: @Sendable (Database) throws -> (T, Publication)) async throws -> T {
        try await database.writeWithoutTransaction { db in
            // The connection's level before (FULL on disk), put back whatever the body did: a
            // restore that fails throws rather than leave later commits unsynced.
            // (Prepared once: the pragmas ran at every acknowledgement.)
            let level = syncing ? nil : try Int.fetchOne(db.cachedStatement(sql: "PRAGMA synchronous"))
            if level != nil { try db.cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute() }
            let result: (T, Publication)
            do {
                result = try Self.inTransaction(db) { try body(db) }
            } catch {
                if let level { try db.cachedStatement(sql: "PRAGMA synchronous = \(level)").execute() }
                throw error
            }
            if let level { try db.cachedStatement(sql: "PRAGMA synchronous = \(level)").execute() }
            self.memberships.withLock { $0.committed(result.1.changes) }
            self.subscribers.publish(result.1)
            return result.0
        }
    }

    /// The transaction commits when `body` returns (and rolls back when it throws); a failed
    /// commit throws.
    private static func inTransaction<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        var result: T?
        try db.inTransaction {
            result = try body()
            return .commit
        }
        // GRDB runs the block once, before it commits; without a result it threw.
        guard let result else { throw StoreError(.damagedStore, "a write transaction ended without running") }
        return result
    }

    /// Takes the replica out of its slot for one transaction (so it changes in place).
    private func borrowReplica() -> ReplicaLease? {
        state.withLock { state in
            guard let replica = state.replica else { return nil }
            state.replica = nil
            state.lent = true
            return ReplicaLease(replica: replica)
        }
    }

    /// Ends a transaction's loan: the replica as committed, or nil to rebuild it from the log.
    private func giveBack(_ replica: Replica?) {
        state.withLock { state in
            state.replica = replica
            state.lent = false
            state.generation += 1
        }
    }
}

/// The replica slot was emptied (by a failed write) between loading it and the transaction.
private struct ReplicaNotLoaded: Error {}
