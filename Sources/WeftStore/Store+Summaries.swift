import Foundation
import GRDB
import WeftModel

// What replication reads from the store: each log's summary (kept in the write transaction by
// `LogSummaryTable`), the operations a peer lacks, and, per commit, what the commit made
// available to the mesh (SPEC.md §13.7: a conversation stays local until its first message).
extension Store {
    /// What one write transaction stored, as replication sees it.
    struct StoredRecord: Sendable {
        /// The new summary of every log the transaction stored operations in or published.
        var summaries: [LogSummary] = []
        /// Operations to push: those stored for the first time in published logs, and every
        /// operation of a log this transaction published.
        var storedOperations: [SignedOperation] = []
        /// What the removal rule is told: the membership of every log of each merge group
        /// with a removal whose membership the transaction changed.
        var memberships: [LogMembership] = []
    }

    /// The removal rule's facts (`Replica.membershipFacts(forGroupsOf:)`) for the logs where a
    /// commit accepted an operation that changes membership (a creation, an add, a removal),
    /// read from the replica the commit left. Operations released from pending are not in
    /// the batch: when some were, every log the commit touched is looked at.
    static func membershipChanges(_ batch: [SignedOperation], report: Replica.Report, replica: Replica) -> [LogMembership] {
        let accepted = Set(report.accepted)
        var logs: Set<ConversationID> = []
        var inBatch: Set<OperationID> = []
        for signed in batch {
            inBatch.insert(signed.id)
            guard accepted.contains(signed.id) else { continue }
            switch signed.operation.body {
            case .createConversation, .addParticipants, .removeParticipants: logs.insert(signed.operation.conversation)
            default: break
            }
        }
        if report.accepted.contains(where: { !inBatch.contains($0) }) { logs.formUnion(report.touched) }
        return logs.isEmpty ? [] : replica.membershipFacts(forGroupsOf: logs.sorted())
    }

    /// Records, inside a write transaction, operations stored for the first time (each once)
    /// and the logs to publish, and returns what changed for replication.
    static func recordStored(_ new: [SignedOperation], publishing: Set<ConversationID>, in db: Database) throws -> StoredRecord {
        guard !new.isEmpty || !publishing.isEmpty else { return StoredRecord() }
        let table = LogSummaryTable(db: db)
        // Logs held before and published now; a log new in this transaction is published as
        // it is added.
        let newlyPublished = try table.publish(publishing)
        try table.add(new.map(LogSummaryTable.Stored.init), publishing: publishing)
        let touched = Set(new.map(\.operation.conversation)).union(newlyPublished)
        guard !touched.isEmpty else { return StoredRecord() }
        let summaries = try table.summaries(of: touched.sorted())
        let published = Set(summaries.filter { $0.isPublished && !$0.isPruned }.map(\.conversation))
        // A log published now takes everything it held along (its creation, membership and
        // metadata changes made before the first message), in causal order.
        var pushed = try newlyPublished.sorted().flatMap { try heldOperations(of: $0, in: db) }
        pushed += new.filter { published.contains($0.operation.conversation) && !newlyPublished.contains($0.operation.conversation) }
        return StoredRecord(summaries: summaries, storedOperations: pushed)
    }

    /// The operations of a received batch that the transaction stores for the first time, each
    /// once, in batch order: those the merge rules decided (accepted, rejected, pending), less
    /// those the operation table held before (`held`, as writing the log rows found them).
    static func firstStored(_ batch: [SignedOperation], report: Replica.Report, held: Set<OperationID>) -> [SignedOperation] {
        var written = Set(report.accepted)
        written.formUnion(report.rejected.map(\.0))
        written.formUnion(report.pending)
        var seen: Set<OperationID> = []
        return batch.filter { written.contains($0.id) && !held.contains($0.id) && seen.insert($0.id).inserted }
    }

    /// A local batch's operations stored for the first time: the accepted ones (a local
    /// operation the replica knew already is a duplicate, and anything else throws).
    static func firstStored(local batch: [SignedOperation], report: Replica.Report) -> [SignedOperation] {
        let accepted = Set(report.accepted)
        var seen: Set<OperationID> = []
        return batch.filter { accepted.contains($0.id) && seen.insert($0.id).inserted }
    }

    /// The logs a local batch publishes: those it posts a message in, and those it asks for.
    static func publishing(_ batch: LocalBatch) -> Set<ConversationID> {
        var logs = batch.publishing
        for signed in batch.operations {
            if case .postMessage = signed.operation.body { logs.insert(signed.operation.conversation) }
        }
        return logs
    }

    // MARK: - Reading
    //
    // Each read comes twice: `fetch…`, async, for async code (the task waits suspended while
    // GRDB reads on its own threads), and the synchronous one, which blocks the calling thread
    // (tools, tests, synchronous callers). The async ones cannot share the synchronous names:
    // in async code Swift picks the async overload and refuses it without `await`, which
    // would break every synchronous call made from async code today.

    /// The summary of every log the store holds, published or not, tombstones of pruned logs
    /// included (`LogSummary.isPruned`), sorted by conversation. Read from the summary tables
    /// (one row per log and per author), not from the operations.
    public func fetchLogSummaries() async throws -> [LogSummary] {
        try await database.read { db in try LogSummaryTable(db: db).summaries() }
    }

    /// `fetchLogSummaries()`, blocking the calling thread.
    public func logSummaries() throws -> [LogSummary] {
        try database.read { db in try LogSummaryTable(db: db).summaries() }
    }

    /// The summary of one log, nil if the store holds nothing of it.
    public func logSummary(of conversation: ConversationID) throws -> LogSummary? {
        try database.read { db in try LogSummaryTable(db: db).summaries(of: [conversation]).first }
    }

    /// Held operations of one log (this identifier, not its merge group; accepted or refused,
    /// not pending: a node vouches only for what it could judge, §14.8) whose
    /// sequence number is above `beyond[author]`, in the order the store decided them (which
    /// respects causality for the accepted ones), at most `limit`: what a peer whose heads are
    /// `beyond` lacks. A pruned log has none.
    public func fetchOperations(in conversation: ConversationID, beyond: VersionVector, limit: Int) async throws -> [SignedOperation] {
        guard limit > 0 else { return [] }
        return try await database.read { db in try Self.operations(in: conversation, beyond: beyond, limit: limit, in: db) }
    }

    /// `fetchOperations(in:beyond:limit:)`, blocking the calling thread.
    public func operations(in conversation: ConversationID, beyond: VersionVector, limit: Int) throws -> [SignedOperation] {
        guard limit > 0 else { return [] }
        return try database.read { db in try Self.operations(in: conversation, beyond: beyond, limit: limit, in: db) }
    }

    private static func operations(
        in conversation: ConversationID, beyond: VersionVector, limit: Int, in db: Database
    ) throws -> [SignedOperation] {
        // The peer's heads as a table joined by author; sequence numbers are stored as their
        // bit pattern, so those of 2^63 and more read negative and count as above any head.
        let entries = beyond.entries.sorted { $0.key < $1.key }
        var arguments: [any DatabaseValueConvertible] = []
        for (author, head) in entries { arguments += [Data(author.bytes), Int64(clamping: head)] }
        let heads = entries.isEmpty
            ? "SELECT NULL, 0 WHERE 0" : "VALUES " + Array(repeating: "(?, ?)", count: entries.count).joined(separator: ", ")
        arguments += [Data(conversation.bytes), limit]
        let rows = try Row.fetchCursor(
            db,
            sql: """
                WITH beyond(author, head) AS (\(heads))
                SELECT o.id, o.wire FROM operation o LEFT JOIN beyond b ON b.author = o.author
                WHERE o.conversation = ? AND o.status != 'pending' AND (o.sequence < 0 OR o.sequence > COALESCE(b.head, 0))
                ORDER BY o.appliedOrder LIMIT ?
                """,
            arguments: StatementArguments(arguments))
        var operations: [SignedOperation] = []
        while let row = try rows.next() { operations.append(try decodeOperation(row)) }
        return operations
    }

    /// Held operations by identifier (accepted or refused, any log), in the order asked; those
    /// the store does not hold, or holds pending, are left out.
    public func fetchOperations(ids: [OperationID]) async throws -> [SignedOperation] {
        try await database.read { db in try Self.operations(ids: ids, in: db) }
    }

    /// `fetchOperations(ids:)`, blocking the calling thread.
    public func operations(ids: [OperationID]) throws -> [SignedOperation] {
        try database.read { db in try Self.operations(ids: ids, in: db) }
    }

    private static func operations(ids: [OperationID], in db: Database) throws -> [SignedOperation] {
        var found: [OperationID: SignedOperation] = [:]
        for chunk in ids.chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try Row.fetchAll(
                db.cached("SELECT id, wire FROM operation WHERE status != 'pending' AND id IN (\(marks))"), arguments: StatementArguments(chunk.map { Data($0.bytes) }))
            {
                let signed = try decodeOperation(row)
                found[signed.id] = signed
            }
        }
        return ids.compactMap { found[$0] }
    }

    /// Every operation held of one log, in the order the store decided them.
    static func heldOperations(of conversation: ConversationID, in db: Database) throws -> [SignedOperation] {
        try Row.fetchAll(
            db.cached("SELECT id, wire FROM operation WHERE conversation = ? ORDER BY appliedOrder"), arguments: [Data(conversation.bytes)]
        ).map(decodeOperation)
    }

    /// An operation from its row's `id` and `wire` columns.
    static func decodeOperation(_ row: Row) throws -> SignedOperation {
        let id = try row.blob(0, "operation.id")
        let wire = try row.blob(1, "operation.wire")
        do {
            return try SignedOperation(wireBytes: [UInt8](wire), claimedID: OperationID(bytes: [UInt8](id)))
        } catch {
            throw StoreError(.damagedLog, "operation \(id.hexPrefix) in the log does not decode: \(error)")
        }
    }
}

extension Store.Applied {
    /// Fills in what a received batch stored (`new` of `validCount` operations that passed the
    /// signature and clock checks).
    mutating func record(received new: [SignedOperation], of validCount: Int, report: Replica.Report, stored: Store.StoredRecord) {
        newOperations = new.map(\.id)
        duplicateCount = validCount - new.count
        pendingCount = report.pending.count
        summaries = stored.summaries
        storedOperations = stored.storedOperations
    }
}

// MARK: - Withholding

extension Store {
    /// The operations among `operations` that replication must not send to the node of
    /// `user`: those posted after `user`'s removal from their conversation (SPEC.md §13.3,
    /// §13.7; `RemovalRule`). A user who was never a participant of a log is a relay and gets
    /// all of it. Replication judges with the rule it is told; this asks the store's replica.
    public func withheld(_ operations: [SignedOperation], from user: UserID) throws -> Set<OperationID> {
        guard !operations.isEmpty else { return [] }
        let replica = try replica(holdingGroupsOf: Set(operations.map(\.operation.conversation)))
        return Set(operations.filter { replica.withholds($0, from: user) }.map(\.id))
    }

    /// The causal past of each operation of `operations` (the join of its causes' clocks), as
    /// the store holds them: what the removal rule judges an operation to send on. An
    /// operation with a cause not held is absent.
    public func fetchCausalPasts(of operations: [SignedOperation]) async throws -> [OperationID: VersionVector] {
        guard !operations.isEmpty else { return [:] }
        let logs = Set(operations.map(\.operation.conversation))
        if let cached = cachedReplica(holding: logs) { return Self.causalPasts(of: operations, on: cached) }
        let localUser = self.localUser
        return try await database.read { db in
            Self.causalPasts(of: operations, on: try Self.groupReplica(for: logs, localUser: localUser, in: db))
        }
    }

    private static func causalPasts(of operations: [SignedOperation], on replica: Replica) -> [OperationID: VersionVector] {
        var pasts: [OperationID: VersionVector] = [:]
        for signed in operations { pasts[signed.id] = replica.causalPast(of: signed) }
        return pasts
    }

    /// What the removal rule is told at start: the membership of every log of each merge
    /// group that holds a removal (`Replica.membershipFacts(forGroupsOf:)`).
    public func membershipFacts() throws -> [LogMembership] {
        let logs = try logsWithRemovals()
        guard !logs.isEmpty else { return [] }
        return try replica(holdingGroupsOf: logs).membershipFacts(forGroupsOf: logs.sorted())
    }

    /// The store's replica if it holds the merge groups of `logs`, else one read for them.
    private func replica(holdingGroupsOf logs: Set<ConversationID>) throws -> Replica {
        if let cached = cachedReplica(holding: logs) { return cached }
        return try database.read { db in try Self.groupReplica(for: logs, localUser: localUser, in: db) }
    }

    /// Logs holding a removal of participants (kind 3): only their merge groups can withhold
    /// anything (§13.3). One scan of the operation table.
    func logsWithRemovals() throws -> Set<ConversationID> {
        try database.read(Self.logsWithRemovals)
    }

    private static func logsWithRemovals(in db: Database) throws -> Set<ConversationID> {
        var logs: Set<ConversationID> = []
        for data in try Data.fetchAll(db.cached("SELECT DISTINCT conversation FROM operation WHERE kind = 3")) {
            logs.insert(try Stored.conversationID(data, "operation.conversation"))
        }
        return logs
    }

    /// The store's own replica if it has the logs of the merge groups of `logs` in memory (a
    /// copy: nothing here changes it); nil when they must be read.
    private func cachedReplica(holding logs: Set<ConversationID>) -> Replica? {
        guard let cached = state.withLock({ $0.replica }), cached.logsToLoad(forLogs: logs).isEmpty else { return nil }
        return cached
    }

    /// A complete replica of the logs of the merge groups of `logs`, read from the operation table.
    static func groupReplica(for logs: Set<ConversationID>, localUser: UserID, in db: Database) throws -> Replica {
        var members: Set<ConversationID> = logs
        for chunk in Array(logs).chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for data in try Data.fetchAll(
                db.cached("""
                    SELECT id FROM conversation WHERE canonical IN (SELECT canonical FROM conversation WHERE id IN (\(marks)))
                    """), arguments: StatementArguments(chunk.map { Data($0.bytes) }))
            {
                members.insert(try WeftStore.Stored.conversationID(data, "conversation.id"))
            }
        }
        var replica = Replica(localUser: localUser)
        var operations: [SignedOperation] = []
        // Each log lies whole in one chunk, in the order it was decided.
        for chunk in members.sorted().chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            operations += try Row.fetchAll(
                db.cached("SELECT id, wire FROM operation WHERE conversation IN (\(marks)) ORDER BY appliedOrder"),
                arguments: StatementArguments(chunk.map { Data($0.bytes) })
            ).map(Self.decodeOperation)
        }
        _ = replica.apply(verified: operations)
        return replica
    }
}
