import NIOCore
import WeftCrypto
import WeftModel

/// What a connected peer is known to hold, as the replicator knows it.
public struct PeerHoldings: Hashable, Sendable {
    public var conversations: UInt32
    public var operations: UInt64

    public init(conversations: UInt32, operations: UInt64) {
        self.conversations = conversations
        self.operations = operations
    }
}

/// One connected peer (SPEC.md §15.5, PEERS).
public struct PeerRecord: Hashable, Sendable {
    /// How the connection came about.
    public enum Origin: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// This node dialed it: an address given with `--peer`.
        case staticAddress = 1
        /// It dialed this node.
        case inbound = 2
        /// This node dialed it because someone asked the running node to (CONNECT, LocalMesh).
        case added = 3
        /// This node dialed it because it found it on the LAN (SPEC.md §16).
        case discovered = 4

        public var description: String {
            switch self {
            case .staticAddress: "static"
            case .inbound: "inbound"
            case .added: "added"
            case .discovered: "discovered"
            }
        }
    }

    public var user: UserID
    /// The name it sent in its handshake (node info).
    public var displayName: String
    /// The remote address of the connection, `host:port`.
    public var address: String
    public var origin: Origin
    /// Milliseconds since 1970 when it authenticated.
    public var connectedAt: UInt64
    /// nil until the replicator knows (or on a node without one).
    public var holdings: PeerHoldings?

    public init(user: UserID, displayName: String, address: String, origin: Origin, connectedAt: UInt64, holdings: PeerHoldings?) {
        self.user = user
        self.displayName = displayName
        self.address = address
        self.origin = origin
        self.connectedAt = connectedAt
        self.holdings = holdings
    }

    func write(into buffer: inout ByteBuffer) {
        buffer.writeBytes(user.bytes)
        buffer.writeControlText(displayName, limit: ControlConstants.maxShortTextByteCount)
        buffer.writeControlText(address, limit: ControlConstants.maxShortTextByteCount)
        buffer.writeInteger(origin.rawValue)
        buffer.writeInteger(connectedAt)
        buffer.writeBool(holdings != nil)
        if let holdings {
            buffer.writeInteger(holdings.conversations)
            buffer.writeInteger(holdings.operations)
        }
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> PeerRecord {
        let user = try buffer.readUser("peer")
        let name = try buffer.readControlText("display name", limit: ControlConstants.maxShortTextByteCount)
        let address = try buffer.readControlText("address", limit: ControlConstants.maxShortTextByteCount)
        let rawOrigin = try buffer.readU8("origin")
        guard let origin = Origin(rawValue: rawOrigin) else { throw .malformed("origin \(rawOrigin) is not assigned") }
        let connectedAt = try buffer.readU64("connection time")
        let holdings = try buffer.readBool("holdings present")
            ? PeerHoldings(conversations: try buffer.readU32("held conversations"), operations: try buffer.readU64("held operations"))
            : nil
        return PeerRecord(user: user, displayName: name, address: address, origin: origin, connectedAt: connectedAt, holdings: holdings)
    }
}

/// A user whose node this node has met, by the display name of its last handshake
/// (SPEC.md §15.5, USERS): what lets the CLI take a name for a participant.
public struct KnownUser: Hashable, Sendable {
    public var user: UserID
    public var displayName: String
    public var isConnected: Bool

    public init(user: UserID, displayName: String, isConnected: Bool) {
        self.user = user
        self.displayName = displayName
        self.isConnected = isConnected
    }

    func write(into buffer: inout ByteBuffer) {
        buffer.writeBytes(user.bytes)
        buffer.writeControlText(displayName, limit: ControlConstants.maxShortTextByteCount)
        buffer.writeBool(isConnected)
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> KnownUser {
        KnownUser(
            user: try buffer.readUser("user"),
            displayName: try buffer.readControlText("display name", limit: ControlConstants.maxShortTextByteCount),
            isConnected: try buffer.readBool("connected"))
    }
}
