import WeftCrypto
import WeftModel
import WeftSync

/// What replication knows, for `weft status`, `weft peers` and `weft conv show`: questions to
/// the core's driver, answered between two events. Once the node has stopped there is no core
/// to ask, and they answer as for a node that knows nothing (zero, nil).
extension Replicator {
    /// Operations of the log known to exist on a peer and not held here.
    public func unsynced(_ conversation: ConversationID) async -> Int { await inspect { $0.unsynced(conversation) } ?? 0 }

    /// The same over all logs.
    public var unsyncedTotal: Int { get async { await inspect { $0.unsyncedTotal } ?? 0 } }

    /// Operations held over all logs.
    public var heldOperations: Int { get async { await inspect { $0.heldOperationCount } ?? 0 } }

    /// What a connected peer is known to hold: how many logs, and the operations its known
    /// heads cover. Nil when the peer is not connected.
    public func holdings(of user: PublicIdentity) async -> (conversations: Int, operations: Int)? {
        guard let peer = links.withLock({ links in links.current[user].flatMap { links.peers[$0] } }),
            let knowledge = await inspect({ $0.peerKnowledge(peer) }) ?? nil
        else { return nil }
        let operations = knowledge.heads.values.reduce(0) { total, heads in
            total + heads.entries.values.reduce(0) { $0 + Int(clamping: $1) }
        }
        return (knowledge.heads.count, operations)
    }

    /// Replication's counters (pushes, duplicates, grafts...), for benchmarks and tests.
    public var statistics: SyncStatistics { get async { await inspect { $0.statistics } ?? SyncStatistics() } }
}
