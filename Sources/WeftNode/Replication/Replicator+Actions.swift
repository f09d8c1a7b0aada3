import NIOCore
import WeftModel
import WeftSync

extension Replicator {
    /// Carries out the core's actions without waiting; returns the events they raise (a peer
    /// that stopped keeping up).
    func perform(_ actions: [SyncAction]) -> [SyncEvent] {
        var raised: [SyncEvent] = []
        for action in actions {
            switch action {
            case .send(let peer, let message):
                guard let (outbox, user) = links.withLock({ links in
                    links.outboxes[peer].flatMap { outbox in links.users[peer].map { (outbox, $0) } }
                }) else { continue }
                var payloads: [ByteBuffer]
                if case .operations(let operations) = message {
                    payloads = operationMessages(withholding(operations.operations, from: user), isPush: operations.isPush)
                } else {
                    payloads = [message.payload]
                }
                for payload in payloads where !outbox.enqueue(payload) { raised.append(.writable(peer, false)) }
            case .apply(let operations, let peer):
                unstored.add(operations, from: peer)
            case .sendStored(let peer, let conversation, let heads, let skipping):
                _ = links.withLock { $0.jobs[peer]?.yield(.beyond(conversation, heads, skipping: skipping)) }
            case .sendStoredOperations(let peer, let ids):
                _ = links.withLock { $0.jobs[peer]?.yield(.ids(ids)) }
            case .acknowledged(let ranges, _):
                acknowledgements.withLock { $0.add(ranges) }
            case .dropped(let peer, let count, let reason):
                let user = links.withLock { $0.users[peer] }
                logger.warning("dropped \(count) operation(s) from \(user.map(String.init(describing:)) ?? "a peer"): \(reason)")
            case .close(let peer, let reason):
                guard let user = links.withLock({ $0.users[peer] }) else { continue }
                logger.warning("closing the connection with \(user): \(reason)")
                node.fail(user, code: .malformedSyncMessage, reason: reason)
            }
        }
        return raised
    }
}
