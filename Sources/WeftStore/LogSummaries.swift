import Foundation
import GRDB
import WeftModel

/// The log summaries: what replication reads of each log, and what each commit made available
/// to the mesh. Owns reading the summaries (kept in the write transaction by `LogSummaryTable`),
/// recording inside a commit the operations it stored for the first time and the logs it
/// publishes (SPEC.md §13.7: a conversation stays local until its first message, unless
/// announced), and the removal rule's facts a commit changed (`StoredRecord`).
struct LogSummaries: Sendable {
    let database: any DatabaseWriter

    // MARK: - Reading

    /// `Store.fetchLogSummaries()`: the summary of every log the store holds, tombstones included.
    func fetchAll() async throws -> [LogSummary] {
        try await database.read { db in try LogSummaryTable(db: db).summaries() }
    }

    /// `fetchAll()`, blocking the calling thread.
    func all() throws -> [LogSummary] {
        try database.read { db in try LogSummaryTable(db: db).summaries() }
    }

    /// The summary of one log, nil if the store holds nothing of it.
    func summary(of conversation: ConversationID) throws -> LogSummary? {
        try database.read { db in try LogSummaryTable(db: db).summaries(of: [conversation]).first }
    }

    /// The summaries of `logs` as they stand, sorted; a log no longer held as one with nothing
    /// in it, unpublished (it takes no part in reconciliation).
    static func summaries(of logs: Set<ConversationID>, in db: Database) throws -> [LogSummary] {
        guard !logs.isEmpty else { return [] }
        var found = Dictionary(uniqueKeysWithValues: try LogSummaryTable(db: db).summaries(of: logs.sorted()).map { ($0.conversation, $0) })
        for log in logs where found[log] == nil { found[log] = LogSummary(conversation: log, isPublished: false) }
        return found.values.sorted { $0.conversation < $1.conversation }
    }

    // MARK: - Inside a commit

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
        var pushed = try newlyPublished.sorted().flatMap { try OperationLog.heldOperations(of: $0, in: db) }
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
    static func publishing(_ batch: Store.LocalBatch) -> Set<ConversationID> {
        var logs = batch.publishing
        for signed in batch.operations {
            if case .postMessage = signed.operation.body { logs.insert(signed.operation.conversation) }
        }
        return logs
    }
}

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

extension Store.Applied {
    /// Fills in what a received batch stored (`new` of `validCount` operations that passed the
    /// signature and clock checks).
    mutating func record(received new: [SignedOperation], of validCount: Int, report: Replica.Report, stored: StoredRecord) {
        newOperations = new.map(\.id)
        duplicateCount = validCount - new.count
        pendingCount = report.pending.count
        summaries = stored.summaries
        storedOperations = stored.storedOperations
    }
}
