import NIOCore
import WeftModel
import WeftSync

extension Replicator {
    /// Carries out the core's actions in order; returns the events they raise (a peer that
    /// stopped keeping up, a read that could not start), which the driver handles next. Never
    /// waits for a peer, the store or another task.
    func perform(_ actions: [SyncAction]) -> [SyncEvent] {
        var raised: [SyncEvent] = []
        for action in actions {
            switch action {
            case .send(let peer, let message):
                guard let (outbox, connection) = links.withLock({ links in
                    links.outboxes[peer].flatMap { outbox in links.connections[peer].map { (outbox, $0) } }
                }) else { continue }
                var payloads: [ByteBuffer] = []
                if case .operations(let operations) = message {
                    payloads = operationMessages(operations.operations, isPush: operations.isPush)
                } else {
                    do {
                        payloads = [try message.payload()]
                    } catch {
                        // The core splits what it sends to fit; one that does not is a bug
                        // of ours, reported, and the peer is not sent a broken message.
                        logger.error("cannot encode a \(message.type) message for \(connection.identity): \(error)")
                    }
                }
                for payload in payloads where !outbox.enqueue(payload) { raised.append(.writable(peer, false)) }
            case .apply(let operations, let peer):
                unstored.add(operations, from: peer)
            case .sendStored(let peer, let conversation, let heads, let skipping, let withholding):
                let job = StoreReadJob(kind: .beyond(conversation, heads, skipping: skipping), withholding: withholding)
                if !startRead(job, for: peer) { raised.append(.storeReadDone(peer)) }
            case .sendStoredOperations(let peer, let ids, let withholding):
                if !startRead(StoreReadJob(kind: .ids(ids), withholding: withholding), for: peer) { raised.append(.storeReadDone(peer)) }
            case .resendWaiting(let peer, let withholding):
                if !startRead(StoreReadJob(kind: .waiting, withholding: withholding), for: peer) { raised.append(.storeReadDone(peer)) }
            case .acknowledged(let ranges, _):
                acknowledgements.withLock { $0.add(ranges) }
            case .dropped(let peer, let count, let reason):
                let user = links.withLock { $0.connections[peer]?.identity }
                logger.warning("dropped \(count) operation(s) from \(user.map(String.init(describing:)) ?? "a peer"): \(reason)")
            case .close(let peer, let reason):
                guard let connection = links.withLock({ $0.connections[peer] }) else { continue }
                logger.warning("closing the connection with \(connection.identity): \(reason)")
                node.fail(connection, code: .malformedSyncMessage, reason: reason)
            }
        }
        return raised
    }

    /// Hands a read to the peer's reader. False if it cannot take it: the connection is gone
    /// (the core is told of that by its end), or its buffer is full, which the core's bound
    /// on reads under way rules out (then the read is dropped and the core told it is done).
    private func startRead(_ job: StoreReadJob, for peer: ConnectionNumber) -> Bool {
        let result = links.withLock { $0.jobs[peer]?.yield(job) }
        switch result {
        case .enqueued, nil: return true
        case .dropped:
            logger.error("a read from the store for a peer was dropped: more were under way than the core allows")
            return false
        case .terminated: return true
        @unknown default: return true
        }
    }
}
