import WeftControl
import WeftModel
import WeftNode

/// A `Replicator`'s figures as the control protocol shows them (`ReplicationReport`).
struct ReplicatorFigures: ReplicationReport {
    let replicator: Replicator

    func unsyncedOperations(in conversation: ConversationID) async -> UInt64 { UInt64(await replicator.unsynced(conversation)) }
    func unsyncedOperations() async -> UInt64 { UInt64(await replicator.unsyncedTotal) }
    func heldOperations() async -> UInt64 { UInt64(await replicator.heldOperations) }
    func holdings(of peer: UserID) async -> PeerHoldings? {
        await replicator.holdings(of: peer).map { PeerHoldings(conversations: UInt32(clamping: $0.conversations), operations: UInt64($0.operations)) }
    }
    func statistics() async -> [ReplicationCounter] {
        let statistics = await replicator.statistics
        let counters: [(String, Int)] = [
            ("operationsReceived", statistics.operationsReceived), ("duplicatesReceived", statistics.duplicatesReceived),
            ("duplicatesAnswered", statistics.duplicatesAnswered),
            ("duplicatesGrafted", statistics.duplicatesGrafted),
            ("operationsPushed", statistics.operationsPushed), ("operationsAnnounced", statistics.operationsAnnounced),
            ("grafts", statistics.grafts), ("prunesSent", statistics.prunesSent),
            ("operationsDropped", statistics.operationsDropped), ("messagesNotQueued", statistics.messagesNotQueued),
            ("requestsDropped", statistics.requestsDropped),
            ("reconciliations", statistics.reconciliations), ("causeRequests", statistics.causeRequests),
            ("reconciliationRequests", statistics.reconciliationRequests), ("logsSentFromStore", statistics.logsSentFromStore),
        ]
        return counters.map { ReplicationCounter(name: $0.0, value: UInt64(clamping: $0.1)) }
    }
}
