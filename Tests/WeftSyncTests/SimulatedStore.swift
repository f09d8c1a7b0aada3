import WeftCrypto
import WeftModel
import WeftSync

/// The store of one simulated node: every operation held, by log, with the summaries the
/// real store keeps, and a `Replica` for the state the node shows.
struct SimulatedStore {
    struct Log {
        var operations: [SignedOperation] = []
        var sequences: [UserID: Set<UInt64>] = [:]
        var summary: LogSummary
    }

    var replica: Replica
    private(set) var byID: [OperationID: SignedOperation] = [:]
    private(set) var logs: [ConversationID: Log] = [:]

    init(user: UserID) { replica = Replica(localUser: user) }

    var summaries: [LogSummary] { logs.keys.sorted().compactMap { logs[$0]?.summary } }

    /// Stores operations received from `source` (verified here, as the store does) and says
    /// what happened.
    mutating func receive(_ operations: [SignedOperation], from source: ConnectionNumber) -> StoreOutcome {
        var fresh: [SignedOperation] = []
        var duplicates = 0
        var refused: [OperationID] = []
        for op in operations {
            if byID[op.id] != nil || fresh.contains(where: { $0.id == op.id }) {
                duplicates += 1
            } else if !op.hasValidSignature {
                refused.append(op.id)
            } else {
                fresh.append(op)
            }
        }
        let (summaries, report) = commit(fresh, publish: true)
        let pending = Set(report.pending)
        let pendingBytes = fresh.filter { pending.contains($0.id) }.reduce(0) { $0 + SyncMessage.byteCount(of: $1) }
        var outcome = StoreOutcome(
            summaries: summaries, stored: fresh, duplicates: duplicates, pending: pending.count, pendingByteCount: pendingBytes,
            refused: refused, source: source)
        // The missing causes, by log, as the real store reports them.
        for op in fresh { if let causes = report.missingCauses[op.id] { outcome.missingCauses[op.operation.conversation, default: []] += causes } }
        outcome.memberships = memberships(after: report)
        return outcome
    }

    /// Stores an operation of the local user. A log is published by its first message, or
    /// at once when created announced.
    mutating func write(_ op: SignedOperation, announce: Bool = false) -> StoreOutcome {
        let publishes: Bool
        if case .postMessage = op.operation.body { publishes = true } else { publishes = announce }
        let (summaries, report) = commit([op], publish: publishes)
        var outcome = StoreOutcome(summaries: summaries, stored: [op])
        outcome.memberships = memberships(after: report)
        return outcome
    }

    /// What the removal rule is told after a commit, as the store tells it: the membership of
    /// the merge groups (with a removal) of every log the commit touched.
    private func memberships(after report: Replica.Report) -> [LogMembership] {
        replica.membershipFacts(forGroupsOf: report.touched.sorted())
    }

    /// What the removal rule is told at start (`Store.membershipFacts()`).
    var memberships: [LogMembership] { replica.membershipFacts(forGroupsOf: logs.keys.sorted()) }

    /// Held operations of the log above `beyond`, in causal order (timestamps grow along causes).
    func operations(in conversation: ConversationID, beyond: VersionVector) -> [SignedOperation] {
        (logs[conversation]?.operations ?? [])
            .filter { $0.operation.sequence > beyond[$0.operation.author] }
            .sorted { ($0.operation.timestamp, $0.id) < ($1.operation.timestamp, $1.id) }
    }

    func operations(ids: [OperationID]) -> [SignedOperation] { ids.compactMap { byID[$0] } }

    func isPublished(_ conversation: ConversationID) -> Bool { logs[conversation]?.summary.isPublished ?? false }

    private mutating func commit(_ operations: [SignedOperation], publish: Bool) -> ([LogSummary], Replica.Report) {
        guard !operations.isEmpty else { return ([], Replica.Report()) }
        var touched: Set<ConversationID> = []
        for signed in operations {
            let op = signed.operation
            byID[signed.id] = signed
            touched.insert(op.conversation)
            var log = logs[op.conversation] ?? Log(summary: LogSummary(conversation: op.conversation, isPublished: false))
            log.operations.append(signed)
            log.sequences[op.author, default: []].insert(op.sequence)
            var head = log.summary.heads[op.author]
            while log.sequences[op.author]!.contains(head + 1) { head += 1 }
            log.summary.heads.set(op.author, head)
            log.summary.digest.insert(signed.id)
            log.summary.operationCount += 1
            log.summary.lastActivity = max(log.summary.lastActivity, op.timestamp)
            if publish { log.summary.isPublished = true }
            logs[op.conversation] = log
        }
        let report = replica.apply(verified: operations)
        return (touched.sorted().map { logs[$0]!.summary }, report)
    }
}
