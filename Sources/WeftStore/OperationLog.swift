import Foundation
import GRDB
import Synchronization
import WeftModel

/// The operation log: every operation the store holds (accepted, pending and rejected, in the
/// `operation` table) and the replica in memory that decided them. Owns the replica's slot,
/// lent to one write transaction at a time (`writeThroughReplica(_:)`); loading logs into it
/// (`OperationLog+Loading.swift`); checking signatures before a write; reading operations back
/// for replication; and deleting them (pending ones past their bounds, relayed logs past
/// retention).
///
/// Reads go to SQLite only; the replica in memory is partial, built on the first write from the
/// index of creations and holding only the logs writes need, so a process that only queries
/// never builds it.
final class OperationLog: Sendable {
    let database: any DatabaseWriter
    let localUser: UserID
    /// How many operations the logs kept in memory between writes may hold together.
    let cachedOperationLimit: Int
    let transactions: Transactions
    /// The partial replica, nil until a write needs it. Only a write on GRDB's writer queue changes it,
    /// lent out of the slot for the transaction (so it changes in place, uncopied) and put back
    /// once the transaction commits; a write that fails leaves it to be rebuilt from the log.
    let slot = Mutex(ReplicaSlot())

    struct ReplicaSlot {
        var replica: Replica?
        /// A write holds the replica: the slot is empty without meaning it must be rebuilt.
        var lent = false
        /// Counts every time the replica changed hands (a commit, a failed write, `forget`), so
        /// a replica built from a read that a commit overtook is not kept.
        var generation: UInt64 = 0
    }

    init(database: any DatabaseWriter, localUser: UserID, cachedOperationLimit: Int, transactions: Transactions) {
        self.database = database
        self.localUser = localUser
        self.cachedOperationLimit = cachedOperationLimit
        self.transactions = transactions
    }

    // MARK: - The replica

    /// The complete replica, rebuilt from the whole log (`Store.replica`).
    func completeReplica() throws -> Replica {
        try Self.completeReplica(from: database, localUser: localUser)
    }

    /// The conversations whose logs are in memory now (for tests).
    var loadedConversations: Set<ConversationID> { slot.withLock { $0.replica?.loadedConversations ?? [] } }

    /// Drops the replica from memory: the next write builds it again (after a bulk write that
    /// went around it).
    func forgetReplica() {
        slot.withLock {
            $0.replica = nil
            $0.generation += 1
        }
    }

    /// Whether the slot is empty without a write holding the replica: it must be built.
    var needsReplica: Bool { slot.withLock { $0.replica == nil && !$0.lent } }

    /// Builds the partial replica (the index of creations, no log loaded) and keeps it, unless
    /// a write got there first. Reads outside the lock (an in-memory `DatabaseQueue`
    /// serializes reads with writes, and a write takes the lock to borrow the replica).
    func loadReplica() async throws {
        let generation = slot.withLock { $0.generation }
        let localUser = self.localUser
        keep(try await database.read { db in try Self.indexedReplica(in: db, localUser: localUser) }, readAt: generation)
    }

    /// `loadReplica()` blocking the calling thread, for the synchronous `checkSignatures(_:)`.
    func loadReplicaBlocking() throws {
        let generation = slot.withLock { $0.generation }
        keep(try database.read { db in try Self.indexedReplica(in: db, localUser: localUser) }, readAt: generation)
    }

    /// Keeps a replica read when the generation was `generation`.
    private func keep(_ replica: Replica, readAt generation: UInt64) {
        slot.withLock { slot in
            // Kept only if nothing changed hands since the read began: a write needs the
            // replica in the slot to commit a change, so the index read is then current.
            if slot.replica == nil && !slot.lent && slot.generation == generation { slot.replica = replica }
        }
    }

    // MARK: - Writing through the replica

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

        /// Forgets pending operations the transaction deletes (`OperationLog+Pending.swift`).
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

    /// Runs `body` in one write transaction with the replica lent to it; puts the replica back
    /// and publishes the body's changes once the transaction commits (`Transactions`).
    func writeThroughReplica<T: Sendable>(
        _ body: @Sendable (Database, inout ReplicaLease) throws -> (T, Publication)
    ) async throws -> T {
        while true {
            if needsReplica { try await loadReplica() }
            do {
                return try await database.writeWithoutTransaction { db in
                    guard var lease = self.borrowReplica() else { throw ReplicaNotLoaded() }
                    let result: (T, Publication)
                    do {
                        result = try Transactions.run(in: db) { try body(db, &lease) }
                    } catch {
                        self.giveBack(lease.isChanged ? nil : lease.replica)
                        throw error
                    }
                    self.giveBack(lease.replica)
                    self.transactions.committed(result.1)
                    return result.0
                }
            } catch is ReplicaNotLoaded {
                continue  // a failed write emptied the slot after it was loaded: load it again
            }
        }
    }

    /// Takes the replica out of its slot for one transaction (so it changes in place).
    private func borrowReplica() -> ReplicaLease? {
        slot.withLock { slot in
            guard let replica = slot.replica else { return nil }
            slot.replica = nil
            slot.lent = true
            return ReplicaLease(replica: replica)
        }
    }

    /// Ends a transaction's loan: the replica as committed, or nil to rebuild it from the log.
    private func giveBack(_ replica: Replica?) {
        slot.withLock { slot in
            slot.replica = replica
            slot.lent = false
            slot.generation += 1
        }
    }
}

/// The replica slot was emptied (by a failed write) between loading it and the transaction.
private struct ReplicaNotLoaded: Error {}
