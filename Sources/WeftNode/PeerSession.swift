import Logging
import NIOCore
import WeftCrypto
import WeftWire

/// The application side of one connection, run as a child task of `MeshNode.run()` (one per
/// peer connection, accepted or dialed), in the manner of swift-nio's `NIOAsyncChannel`
/// examples: the protocol stays in `PeerChannelHandler` on the event loop; the session reads
/// what the handler passes up, only as fast as the node's events are taken, and reports it as
/// node events. While the peer is authenticated, `MeshNode.send(_:to:)` writes to its channel.
///
/// The session never throws: a connection's failure ends that connection only.
struct PeerSession: Sendable {
    let connection: NIOAsyncChannel<PeerChannelEvent, ByteBuffer>
    let direction: ConnectionDirection
    let origin: ConnectedPeer.Origin
    let dialed: PeerAddress?
    let node: MeshNode

    /// Runs until the connection has closed. Returns whether the peer authenticated (a dialer
    /// then starts its backoff afresh).
    func run() async -> Bool {
        let address = connection.channel.remoteAddress
        var peer: NodeInfo?
        var authenticated: PeerConnection?
        do {
            try await withTaskCancellationHandler {
                try await connection.executeThenClose { inbound, _ in
                    for try await event in inbound {
                        switch event {
                        case .authenticated(let info):
                            let session = ConnectedPeer(
                                info: info, address: address, direction: direction, origin: origin, dialed: dialed,
                                channel: connection.channel)
                            // A refused connection (cut link, duplicate) is closing: its peer
                            // is reported to nobody, and its data is not passed on.
                            if node.sessionAuthenticated(session) {
                                peer = info
                                let connection = PeerConnection(identity: info.identity, channel: self.connection.channel)
                                authenticated = connection
                                await node.report(
                                    .peerAuthenticated(info, address: address, direction: direction, connection: connection))
                            }
                        case .data(let bytes):
                            if let authenticated { await node.report(.data(authenticated, bytes)) }
                        case .pong(let roundTrip):
                            if let peer { await node.report(.pong(peer.identity, roundTrip: roundTrip)) }
                        case .ended(let end):
                            // Unregister before reporting, so whoever sees the end also sees the
                            // peer gone from `connectedPeers`. A connection replaced by a newer
                            // one with the same peer (§5) names it too, as it was reported: the
                            // peer is still connected then, which `isConnected` tells.
                            node.sessionEnded(channel: connection.channel)
                            await node.report(.connectionEnded(peer: peer, address: address, end, connection: authenticated))
                        }
                    }
                }
            } onCancel: {
                // The node is stopping: say so to the peer. The handler closes the channel once
                // the CLOSE frame is written, which ends the loop above.
                let request = PeerChannelHandler.CloseRequest(code: .shuttingDown, reason: "the node is shutting down")
                connection.channel.triggerUserOutboundEvent(request, promise: nil)
            }
        } catch {
            node.logger.debug("session with \(address.map(String.init(describing:)) ?? "?") ended: \(error)")
        }
        node.sessionEnded(channel: connection.channel)
        return peer != nil
    }
}
