import NIOCore
import Synchronization
import WeftControl
import WeftCrypto
import WeftWire

/// Who this node is connected to and whom it has met, kept from its `NodeEvent`s: what
/// `weft peers` shows, and the display names the CLI accepts for participants (learned from
/// peers' handshakes, SPEC.md §3.3). In memory only; bounded by `maxKnownUsers`.
public final class PeerDirectory: Sendable {
    /// One authenticated connection.
    public struct Connection: Sendable, Equatable {
        public var info: NodeInfo
        /// The remote address, `host:port` (empty if the socket did not say).
        public var address: String
        public var direction: ConnectionDirection
        /// Milliseconds since 1970 when it authenticated.
        public var since: UInt64
    }

    /// Users remembered by name at most; the oldest name learned is forgotten first.
    public static let maxKnownUsers = 4096

    private struct State {
        var connections: [Connection] = []
        /// The display name of each user's latest handshake, in the order learned.
        var names: [PublicIdentity: String] = [:]
        var learned: [PublicIdentity] = []
    }

    private let state = Mutex(State())
    private let clock: @Sendable () -> UInt64

    /// - Parameter clock: milliseconds since 1970.
    public init(clock: @escaping @Sendable () -> UInt64) {
        self.clock = clock
    }

    /// Takes note of an event; events other than authentication and connection ends are ignored.
    public func record(_ event: NodeEvent) {
        switch event {
        case .peerAuthenticated(let info, let address, let direction, _):
            let connection = Connection(info: info, address: Self.text(address), direction: direction, since: clock())
            state.withLock { state in
                state.connections.append(connection)
                if state.names.updateValue(info.displayName, forKey: info.identity) == nil {
                    state.learned.append(info.identity)
                    if state.learned.count > Self.maxKnownUsers { state.names[state.learned.removeFirst()] = nil }
                }
            }
        case .connectionEnded(let peer?, let address, _, _):
            let address = Self.text(address)
            state.withLock { state in
                if let index = state.connections.firstIndex(where: { $0.info.identity == peer.identity && $0.address == address })
                    ?? state.connections.firstIndex(where: { $0.info.identity == peer.identity })
                {
                    state.connections.remove(at: index)
                }
            }
        case .listening, .connectionEnded(nil, _, _, _), .pong, .data:
            break
        }
    }

    /// Authenticated connections now, oldest first.
    public var connections: [Connection] { state.withLock { $0.connections } }

    /// Every user met, with the name of their latest handshake and whether connected now.
    public var knownUsers: [KnownUser] {
        state.withLock { state in
            let connected = Set(state.connections.map(\.info.identity))
            return state.learned.compactMap { user in
                state.names[user].map { KnownUser(user: user, displayName: $0, isConnected: connected.contains(user)) }
            }
        }
    }

    private static func text(_ address: SocketAddress?) -> String {
        guard let address else { return "" }
        guard let ip = address.ipAddress, let port = address.port else { return address.description }
        return PeerAddress(host: ip, port: port).description
    }
}
