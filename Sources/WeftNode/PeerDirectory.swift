import NIOCore
import Synchronization
import WeftControl
import WeftCrypto
import WeftSync
import WeftWire

/// Who this node is connected to and whom it knows by name, kept from its `NodeEvent`s and
/// the NAMES its peers send: what `weft peers` shows, and the display names the CLI shows and
/// accepts for participants. Names come from peers' handshakes (SPEC.md §3.3) and, for users
/// met only through a relay, from NAMES (§14.12), by `NameBook`'s rules. In memory only;
/// bounded by `maxKnownUsers`.
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

    /// Users remembered by name at most; the oldest name heard, else the oldest learned in a
    /// handshake, is forgotten first.
    public static let maxKnownUsers = 4096
    /// Users whose names, heard from one peer identity (over all its connections), are kept
    /// at most (§14.12); what it says of more is dropped.
    public static let maxNamesHeardPerPeer = 1024

    public typealias UserName = SyncMessage.UserName

    private struct State {
        var connections: [Connection] = []
        var names: NameBook
    }

    private let state: Mutex<State>
    private let clock: @Sendable () -> UInt64

    /// - Parameters:
    ///   - localUser: the node's own user, whose name peers' NAMES may not set.
    ///   - clock: milliseconds since 1970.
    public init(localUser: PublicIdentity? = nil, clock: @escaping @Sendable () -> UInt64) {
        self.clock = clock
        state = Mutex(State(names: NameBook(
            capacity: Self.maxKnownUsers, maxHeardPerPeer: Self.maxNamesHeardPerPeer, localUser: localUser)))
    }

    /// Takes note of an event; events other than authentication and connection ends are ignored.
    /// Returns the name a handshake taught, when it is news to tell other peers (§14.12).
    @discardableResult
    public func record(_ event: NodeEvent) -> [UserName] {
        switch event {
        case .peerAuthenticated(let info, let address, let direction, _):
            let connection = Connection(info: info, address: Self.text(address), direction: direction, since: clock())
            return state.withLock { state in
                state.connections.append(connection)
                return state.names.learn(info.displayName, of: info.identity).map { [$0] } ?? []
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
        return []
    }

    /// Takes the entries of a NAMES message from `peer` (§14.12); returns those that are news
    /// to tell other peers: new users, and changed names heard from `peer` before.
    public func hear(_ names: [UserName], from peer: PublicIdentity) -> [UserName] {
        state.withLock { $0.names.hear(names, from: peer) }
    }

    /// What to tell `peer` in NAMES when it connects: every name known but its own, those
    /// heard from it, and empty ones.
    public func names(toTell peer: PublicIdentity) -> [UserName] {
        state.withLock { $0.names.names(toTell: peer) }
    }

    /// NAMES entries dropped: past a peer identity's bound, or with the directory full of
    /// names from handshakes (`namesDropped` in STATISTICS, §15.5).
    public var namesDropped: UInt64 { state.withLock { $0.names.dropped } }

    /// Users whose kept name was heard from `peer`.
    public func namesHeard(from peer: PublicIdentity) -> Int { state.withLock { $0.names.heardCount(from: peer) } }

    /// Authenticated connections now, oldest first.
    public var connections: [Connection] { state.withLock { $0.connections } }

    /// Every user known by name, oldest first: with the name of their latest handshake with
    /// this node, or else the name heard from a peer, and whether connected now (a user only
    /// heard of is not).
    public var knownUsers: [KnownUser] {
        state.withLock { state in
            let connected = Set(state.connections.map(\.info.identity))
            return state.names.known.map { KnownUser(user: $0.user, displayName: $0.name, isConnected: connected.contains($0.user)) }
        }
    }

    private static func text(_ address: SocketAddress?) -> String {
        guard let address else { return "" }
        guard let ip = address.ipAddress, let port = address.port else { return address.description }
        return PeerAddress(host: ip, port: port).description
    }
}
