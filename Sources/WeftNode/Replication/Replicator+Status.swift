import WeftCrypto
import WeftModel
import WeftSync

/// What replication knows, for `weft status`, `weft peers` and `weft conv show`.
extension Replicator {
    /// Operations of the log known to exist on a peer and not held here.
    public func unsynced(_ conversation: ConversationID) -> Int { core.withLock { $0.unsynced(conversation) } }

    /// The same over all logs.
    public var unsyncedTotal: Int { core.withLock { $0.unsyncedTotal } }

    /// Operations held over all logs.
    public var heldOperations: Int { core.withLock { $0.heldOperationCount } }

    /// What a connected peer is known to hold: how many logs, and the operations its known
    /// heads cover. Nil when the peer is not connected.
    public func holdings(of user: PublicIdentity) -> (conversations: Int, operations: Int)? {
        guard let peer = links.withLock({ $0.peers[user] }),
            let knowledge = core.withLock({ $0.peerKnowledge(peer) })
        else { return nil }
        let operations = knowledge.heads.values.reduce(0) { total, heads in
            total + heads.entries.values.reduce(0) { $0 + Int(clamping: $1) }
        }
        return (knowledge.heads.count, operations)
    }

    /// Replication's counters (pushes, duplicates, grafts...), for benchmarks and tests.
    public var statistics: SyncStatistics { core.withLock { $0.statistics } }
}
