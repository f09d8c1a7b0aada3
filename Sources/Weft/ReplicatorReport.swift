import WeftControl
import WeftModel
import WeftNode

/// The control protocol's view of a node's replication.
struct ReplicatorReport: ReplicationReport {
    let replicator: Replicator

    func unsyncedOperations(in conversation: ConversationID) async -> UInt64 { UInt64(replicator.unsynced(conversation)) }
    func unsyncedOperations() async -> UInt64 { UInt64(replicator.unsyncedTotal) }
    func heldOperations() async -> UInt64 { UInt64(replicator.heldOperations) }
    func holdings(of peer: UserID) async -> PeerHoldings? {
        replicator.holdings(of: peer).map { PeerHoldings(conversations: UInt32(clamping: $0.conversations), operations: UInt64($0.operations)) }
    }
}
