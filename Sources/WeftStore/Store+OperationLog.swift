import WeftModel

// The operation log (`OperationLog`) as the store shows it: the replica, checking signatures,
// the log's bounds (pending operations, retention) and reading it whole.
extension Store {
    /// How many operations the logs kept in memory between writes may hold together, unless
    /// the store is opened with another limit (`OperationLog+Loading.swift`).
    public static let defaultCachedOperationLimit = 100_000

    /// Pending operations one log may hold, unless the store is opened with another limit:
    /// the replication bound per peer (10,000, SPEC.md §14.8), so one peer fills one log at
    /// most; a log at the limit costs some 25 MB while in memory.
    public static let defaultPendingLimit = 10_000

    /// How long before the wall clock an operation may be stamped and still wait for its causes,
    /// unless the store is opened with another lifetime: 24 hours. Causes normally arrive within
    /// seconds (a cause request after a graft timeout, reconciliation every 30 s); a day covers a
    /// peer that holds them being away overnight. Nothing is lost for good: an operation accepted
    /// somewhere comes back by reconciliation once its causes are held here.
    public static let defaultPendingLifetime: UInt64 = 24 * 60 * 60 * 1000

    // MARK: - The replica

    /// The complete replica, rebuilt from the whole log on every call: every stored operation
    /// (accepted, pending and rejected) replayed in applied order. Rejected ones are refused
    /// again, pending ones wait again, so the result is the replica that wrote the log. It costs
    /// the whole log in time and memory, so it is for tests and tools on small stores; writers
    /// use `commitLocal(building:)`, which builds against the store's own (partial) replica.
    public var replica: Replica {
        get throws { try operationLog.completeReplica() }
    }

    // MARK: - Signatures

    /// Checks the signatures of received operations, in parallel over the cores. Operations
    /// the replica already accepted need no second check (a peer resending); while a write
    /// holds the replica, everything is checked rather than waiting, and an operation of a log
    /// not in memory is checked too.
    ///
    /// The calling task waits suspended, holding no thread: the checkers' threads
    /// (`SignatureCheckers`) resume it when the last chunk is checked, and the replica, when
    /// it must be built first, is read through GRDB's async read.
    public func checkSignatures(_ operations: [SignedOperation]) async throws -> CheckedBatch {
        try await operationLog.checkSignatures(operations)
    }

    /// `checkSignatures(_:)` that blocks the calling thread until every signature is checked
    /// (and while the replica is read). Never from async code, where it holds a thread of the
    /// cooperative pool (two on a two-core machine) for the whole check: there, call it with
    /// `await` and the async one runs.
    public func checkSignatures(_ operations: [SignedOperation]) throws -> CheckedBatch {
        try operationLog.checkSignatures(operations)
    }

    /// Whether each signature verifies, checked in parallel over the cores (Ed25519
    /// verification is the expensive part of accepting an operation), below the writer's
    /// priority (`SignatureCheckers`). `skipping` marks operations already known good,
    /// reported valid without a check. The calling task waits suspended, holding no thread.
    public static func verifySignatures(_ operations: [SignedOperation], skipping known: [Bool]? = nil) async -> [Bool] {
        await SignatureCheckers.shared.check(operations, skipping: known)
    }

    /// `verifySignatures(_:skipping:)` that blocks the calling thread until every signature is
    /// checked: never from async code.
    public static func verifySignatures(_ operations: [SignedOperation], skipping known: [Bool]? = nil) -> [Bool] {
        SignatureCheckers.shared.checkBlocking(operations, skipping: known)
    }

    // MARK: - Bounds

    /// Deletes every pending operation stamped before `wallMilliseconds` (callers pass the wall
    /// clock less `pendingLifetime`), in one transaction, with their share of their logs'
    /// summaries; the commit publishes the new summaries (a log left with nothing is reported
    /// with `operationCount` 0 and unpublished). Returns the deleted operations: replication
    /// counts them released from pending (and forgets it saw them, so they are taken again).
    @discardableResult
    public func expirePending(olderThan wallMilliseconds: UInt64) async throws -> [OperationID] {
        try await operationLog.expirePending(olderThan: wallMilliseconds)
    }

    /// Deletes every log the local user never participated in (nor in any member of its merge
    /// group) whose group's last activity is older than `wallMilliseconds`: its operations,
    /// conversations and messages. Each log's summary stays as a tombstone
    /// (`LogSummary.isPruned`), so reconciliation does not fetch it again; if an operation of
    /// a pruned log arrives later, the tombstone goes and the log is held again from scratch.
    /// Returns how many logs were pruned (SPEC.md §13.8).
    @discardableResult
    public func pruneRelayed(olderThan wallMilliseconds: UInt64) async throws -> Int {
        try await operationLog.pruneRelayed(olderThan: wallMilliseconds)
    }

    // MARK: - Reading the log

    /// The accepted operations of one conversation log (this identifier, not its merge group),
    /// in the order they were applied, which respects causality: what a peer needs to sync it.
    public func operations(in conversation: ConversationID) throws -> [SignedOperation] {
        try operationLog.operations(in: conversation)
    }

    /// How many operations the log holds with each status: accepted, pending, rejected.
    public func operationCounts() throws -> (accepted: Int, pending: Int, rejected: Int) { try operationLog.operationCounts() }
}
