import AsyncAlgorithms
import NIOCore
import WeftCrypto
import WeftWire

/// Which side opened a connection.
public enum ConnectionDirection: String, Sendable {
    case inbound, outbound
}

/// What a running node reports, in order per connection, on `MeshNode.events`.
public enum NodeEvent: Sendable {
    /// The listener is bound and accepting connections.
    case listening(SocketAddress)
    /// A peer completed the handshake and proved its identity, on `connection`.
    case peerAuthenticated(NodeInfo, address: SocketAddress?, direction: ConnectionDirection, connection: PeerConnection)
    /// A connection ended; `peer` and `connection` are nil when it ended before
    /// authentication (or was refused at it). An authenticated connection that a newer one
    /// with the same peer replaced (§5) names the peer too, which is still connected then
    /// (`MeshNode.isConnected`), and its own `connection`, which is not the peer's now.
    case connectionEnded(peer: NodeInfo?, address: SocketAddress?, ConnectionEnd, connection: PeerConnection?)
    /// A keepalive round trip completed.
    case pong(PublicIdentity, roundTrip: TimeAmount)
    /// Application bytes from an authenticated peer, and the connection they came on.
    case data(PeerConnection, ByteBuffer)
}

/// A node's events, handed over one at a time.
///
/// Bound and policy: nothing is buffered here and nothing is dropped. Each connection's
/// session hands over its next event only when the consumer asks for one, and until then reads
/// nothing more from its peer: the session's inbound buffer (`MeshNode.inboundBackPressure`)
/// fills, the socket stops being read, and TCP slows the peer down. So keep consuming events
/// while the node runs; a connection whose events are not taken for longer than the idle
/// timeout (60 s by default) is closed by it. The sequence ends when `MeshNode.run()` returns.
/// Several consumers may iterate it; each event goes to one of them.
public struct NodeEvents: AsyncSequence, Sendable {
    public typealias Element = NodeEvent
    public typealias Failure = Never

    let channel: AsyncChannel<NodeEvent>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncChannel<NodeEvent>.Iterator

        public mutating func next() async -> NodeEvent? { await base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: channel.makeAsyncIterator()) }
}
