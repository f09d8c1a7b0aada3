import NIOCore
import WeftCrypto

/// One authenticated connection with a peer, as the node's events name it. A peer that
/// reconnects comes back on a new one, so whatever belongs to a connection (its compressed
/// streams, its writer) is keyed by it, never by the peer's identity alone: nothing of an old
/// connection can reach a new one (`MeshNode.send(_:on:)`).
public struct PeerConnection: Hashable, Sendable, CustomStringConvertible {
    /// Who authenticated on it.
    public let identity: PublicIdentity
    let channel: any Channel

    init(identity: PublicIdentity, channel: any Channel) {
        self.identity = identity
        self.channel = channel
    }

    public static func == (lhs: PeerConnection, rhs: PeerConnection) -> Bool { lhs.channel === rhs.channel }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(channel)) }

    public var description: String { "\(identity) on \(channel.remoteAddress.map(String.init(describing:)) ?? "a closed connection")" }
}
