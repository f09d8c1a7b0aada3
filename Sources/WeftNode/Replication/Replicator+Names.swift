import NIOCore
import WeftCrypto
import WeftSync

// NAMES (SPEC.md §14.12): display names travel through relays, so that a user met only
// through another node is shown by name. The directory decides what is news (`NameBook`);
// this edge sends it, only to peers whose node info has the *names* bit.

extension Replicator {
    /// A peer authenticated: tells it every name this node knows (if it takes NAMES), and
    /// tells the other peers that take NAMES what its handshake taught (`news`).
    func introduce(_ peer: ConnectionNumber, news: [SyncMessage.UserName]) async {
        guard let directory, let (identity, tellsNames) = links.withLock({ links in
            links.connections[peer].map { ($0.identity, links.namesPeers.contains(peer)) }
        }) else { return }
        if tellsNames { await tell(directory.names(toTell: identity), to: peer) }
        await spread(news, except: identity)
    }

    /// Takes a NAMES message from `source` and tells the other peers what was news in it.
    func heard(_ names: [SyncMessage.UserName], from source: PublicIdentity) async {
        guard let directory else { return }
        await spread(directory.hear(names, from: source), except: source)
    }

    /// Tells `news` to every connected peer that takes NAMES but `source` (the peer it came
    /// from, or whose own name it is), leaving out each peer's own name.
    private func spread(_ news: [SyncMessage.UserName], except source: PublicIdentity) async {
        guard !news.isEmpty else { return }
        let targets = links.withLock { links in
            links.namesPeers.compactMap { peer in links.connections[peer].map { (peer, $0.identity) } }
        }
        for (peer, identity) in targets where identity != source {
            await tell(news.filter { $0.user != identity }, to: peer)
        }
    }

    /// Queues `names` for `peer` in NAMES messages of at most `SyncMessage.maxNamesCount`
    /// entries. A queue that crosses its high mark tells the core, as for any message. A peer
    /// whose queue is past its high mark is told nothing more: what one peer says must not
    /// grow the queue of another that does not keep up (names are a courtesy; the peer hears
    /// them all again when it next connects).
    private func tell(_ names: [SyncMessage.UserName], to peer: ConnectionNumber) async {
        guard !names.isEmpty, let outbox = links.withLock({ $0.outboxes[peer] }) else { return }
        for start in stride(from: 0, to: names.count, by: SyncMessage.maxNamesCount) {
            guard outbox.hasRoom else {
                logger.debug("not telling \(outbox.connection.identity) \(names.count - start) name(s): its queue is full")
                return
            }
            let part = Array(names[start..<min(start + SyncMessage.maxNamesCount, names.count)])
            let payload: ByteBuffer
            do {
                payload = try SyncMessage.names(part).payload()
            } catch {
                // Parts are cut to fit and names kept within 64 bytes; a bug of ours if not.
                logger.error("cannot encode a NAMES message for \(outbox.connection.identity): \(error)")
                return
            }
            if !outbox.enqueue(payload) { await feed(.writable(peer, false)) }
        }
    }
}
