import WeftModel

// What replication reads from the store: each log's summary (`LogSummaries`), the operations a
// peer lacks, and what the removal rule judges (`OperationLog`).
//
// Each read comes twice: `fetch…`, async, for async code (the task waits suspended while
// GRDB reads on its own threads), and the synchronous one, which blocks the calling thread
// (tools, tests, synchronous callers). The async ones cannot share the synchronous names:
// in async code Swift picks the async overload and refuses it without `await`, which
// would break every synchronous call made from async code today.
extension Store {
    // MARK: - Summaries

    /// The summary of every log the store holds, published or not, tombstones of pruned logs
    /// included (`LogSummary.isPruned`), sorted by conversation. Read from the summary tables
    /// (one row per log and per author), not from the operations.
    public func fetchLogSummaries() async throws -> [LogSummary] { try await summaries.fetchAll() }

    /// `fetchLogSummaries()`, blocking the calling thread.
    public func logSummaries() throws -> [LogSummary] { try summaries.all() }

    /// The summary of one log, nil if the store holds nothing of it.
    public func logSummary(of conversation: ConversationID) throws -> LogSummary? { try summaries.summary(of: conversation) }

    // MARK: - Operations

    /// Held operations of one log (this identifier, not its merge group; accepted or refused,
    /// not pending: a node vouches only for what it could judge, §14.8) whose
    /// sequence number is above `beyond[author]`, in the order the store decided them (which
    /// respects causality for the accepted ones), at most `limit`: what a peer whose heads are
    /// `beyond` lacks. A pruned log has none.
    public func fetchOperations(in conversation: ConversationID, beyond: VersionVector, limit: Int) async throws -> [SignedOperation] {
        try await operationLog.fetchOperations(in: conversation, beyond: beyond, limit: limit)
    }

    /// `fetchOperations(in:beyond:limit:)`, blocking the calling thread.
    public func operations(in conversation: ConversationID, beyond: VersionVector, limit: Int) throws -> [SignedOperation] {
        try operationLog.operations(in: conversation, beyond: beyond, limit: limit)
    }

    /// Held operations by identifier (accepted or refused, any log), in the order asked; those
    /// the store does not hold, or holds pending, are left out.
    public func fetchOperations(ids: [OperationID]) async throws -> [SignedOperation] { try await operationLog.fetchOperations(ids: ids) }

    /// `fetchOperations(ids:)`, blocking the calling thread.
    public func operations(ids: [OperationID]) throws -> [SignedOperation] { try operationLog.operations(ids: ids) }

    // MARK: - Withholding

    /// The operations among `operations` that replication must not send to the node of
    /// `user`: those posted after `user`'s removal from their conversation (SPEC.md §13.3,
    /// §13.7; `RemovalRule`). A user who was never a participant of a log is a relay and gets
    /// all of it. Replication judges with the rule it is told; this asks the store's replica.
    public func withheld(_ operations: [SignedOperation], from user: UserID) throws -> Set<OperationID> {
        try operationLog.withheld(operations, from: user)
    }

    /// The causal past of each operation of `operations` (the join of its causes' clocks), as
    /// the store holds them: what the removal rule judges an operation to send on. An
    /// operation with a cause not held is absent.
    public func fetchCausalPasts(of operations: [SignedOperation]) async throws -> [OperationID: VersionVector] {
        try await operationLog.fetchCausalPasts(of: operations)
    }

    /// What the removal rule is told at start: the membership of every log of each merge
    /// group that holds a removal (`Replica.membershipFacts(forGroupsOf:)`).
    public func membershipFacts() throws -> [LogMembership] { try operationLog.membershipFacts() }
}
