import NIOCore
import WeftWire

/// A peer with an authenticated connection: who it is, where, and how the node found it.
public struct ConnectedPeer: Sendable {
    /// How a connection came about, as `weft peers` shows it.
    public enum Origin: String, Sendable {
        /// Dialed because the node's configuration names the address (`--peer`).
        case configured = "static"
        /// Dialed because someone asked the running node to (control socket, LocalMesh).
        case added
        /// Found on the LAN (discovery).
        case discovered
        /// The peer dialed this node.
        case inbound
    }

    /// What the peer said of itself in the handshake.
    public let info: NodeInfo
    /// The peer's socket address.
    public let address: SocketAddress?
    public let direction: ConnectionDirection
    public let origin: Origin
    /// The address dialed, for outbound connections.
    public let dialed: PeerAddress?
    let channel: any Channel

    /// Where the peer says it accepts connections: the port of its node info at the host the
    /// connection comes from; nil if it does not listen or the address is not IP.
    var announcedAddress: PeerAddress? {
        guard let port = info.listenPort, let host = address?.ipAddress else { return nil }
        return PeerAddress(host: host, port: Int(port))
    }
}
