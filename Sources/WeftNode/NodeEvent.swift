import NIOCore
import WeftCrypto
import WeftWire

/// Which side opened a connection.
public enum ConnectionDirection: String, Sendable {
    case inbound, outbound
}

/// What a running node reports, in order, on `MeshNode.events`.
public enum NodeEvent: Sendable {
    /// The listener is bound and accepting connections.
    case listening(SocketAddress)
    /// A peer completed the handshake and proved its identity.
    case peerAuthenticated(NodeInfo, address: SocketAddress?, direction: ConnectionDirection)
    /// A connection ended; `peer` is nil when it ended before authentication.
    case connectionEnded(peer: NodeInfo?, address: SocketAddress?, ConnectionEnd)
    /// A keepalive round trip completed.
    case pong(PublicIdentity, roundTrip: TimeAmount)
    /// Application bytes from an authenticated peer.
    case data(PublicIdentity, ByteBuffer)
}
