import NIOCore
import WeftSync

// Rich content (SPEC.md §17.8): the content-transfer messages ride on the replicator's
// connections, but replication never sees them. The content service gets the connections of
// peers that set the *content* bit, and writes to those connections only.

extension Replicator {
    /// A peer that set the *content* bit authenticated on connection `peer`.
    func contentConnected(_ peer: ConnectionNumber, _ connection: PeerConnection) async {
        guard let content, let outbox = links.withLock({ $0.outboxes[peer] }) else { return }
        let node = self.node
        let link = ContentLink(
            identity: connection.identity, number: peer, outbox: outbox,
            send: { [weak self] payload in await self?.sendContent(payload, on: peer) },
            fail: { reason in node.fail(connection, code: .malformedSyncMessage, reason: reason) })
        links.withLock { $0.contentLinks[peer] = link }
        await content.connected(link)
    }

    /// Connection `peer` ended or was replaced.
    func contentDisconnected(_ peer: ConnectionNumber) async {
        guard let content, let link = links.withLock({ $0.contentLinks.removeValue(forKey: peer) }) else { return }
        await content.disconnected(link)
    }

    /// A content-transfer message arrived on connection `peer`: to the content service if the
    /// peer set the bit (a peer that did not was never sent a request, so it is ignored).
    func contentReceived(_ message: ContentTransferMessage, on peer: ConnectionNumber) async {
        guard let content, let link = links.withLock({ $0.contentLinks[peer] }) else {
            logger.debug("ignoring a \(message.type) message from a peer that did not set the content bit")
            return
        }
        await content.received(message, on: link)
    }

    /// Queues a content message on the sync lane of connection `peer`, telling the sync core
    /// when the queue passes its high mark, as for any message.
    func sendContent(_ payload: ByteBuffer, on peer: ConnectionNumber) async {
        guard let outbox = links.withLock({ $0.outboxes[peer] }) else { return }
        if !outbox.enqueue(payload) { await feed(.writable(peer, false)) }
    }
}
