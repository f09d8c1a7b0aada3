import NIOCore
import WeftCrypto
import WeftModel

/// The node as `weft status` shows it (SPEC.md §15.5, STATUS). The daemon fills what it knows
/// itself; the fields marked "replication" come from a `ReplicationReport` and stay nil (shown
/// as unknown) on a node that does not replicate.
public struct NodeStatus: Hashable, Sendable {
    public var user: UserID
    public var displayName: String
    /// `host:port` the mesh listener is bound to; empty if the node only dials.
    public var listenAddress: String
    /// Milliseconds since 1970 when the node started.
    public var startedAt: UInt64
    /// Authenticated connections now.
    public var connectedPeers: UInt32
    /// Conversations the node's user is or was a participant of.
    public var conversations: UInt32
    /// Messages of this user still waiting in the outbox.
    public var unsentMessages: UInt32
    /// Configuration: how long a message may wait for delivery before it fails.
    public var timeToLiveSeconds: UInt32
    /// Configuration: how long relayed conversations are kept.
    public var retentionDays: UInt32
    /// Replication: whether a replicator runs on this node.
    public var isReplicating: Bool
    /// Replication: operations held, in every log (relayed ones included).
    public var heldOperations: UInt64?
    /// Replication: operations known to exist on a peer and not held yet, over all logs.
    public var unsyncedOperations: UInt64?
    /// Whether LAN discovery is on (SPEC.md §16).
    public var discovery: Bool
    /// The interfaces discovery runs on (none when it is off, or finds none it can use).
    public var discoveryInterfaces: [String]

    public init(
        user: UserID, displayName: String, listenAddress: String, startedAt: UInt64, connectedPeers: UInt32,
        conversations: UInt32, unsentMessages: UInt32, timeToLiveSeconds: UInt32, retentionDays: UInt32,
        isReplicating: Bool, heldOperations: UInt64?, unsyncedOperations: UInt64?, discovery: Bool = false,
        discoveryInterfaces: [String] = []
    ) {
        self.user = user
        self.displayName = displayName
        self.listenAddress = listenAddress
        self.startedAt = startedAt
        self.connectedPeers = connectedPeers
        self.conversations = conversations
        self.unsentMessages = unsentMessages
        self.timeToLiveSeconds = timeToLiveSeconds
        self.retentionDays = retentionDays
        self.isReplicating = isReplicating
        self.heldOperations = heldOperations
        self.unsyncedOperations = unsyncedOperations
        self.discovery = discovery
        self.discoveryInterfaces = discoveryInterfaces
    }

    func write(into buffer: inout ByteBuffer) {
        buffer.writeBytes(user.bytes)
        buffer.writeControlText(displayName, limit: ControlConstants.maxShortTextByteCount)
        buffer.writeControlText(listenAddress, limit: ControlConstants.maxShortTextByteCount)
        buffer.writeInteger(startedAt)
        buffer.writeInteger(connectedPeers)
        buffer.writeInteger(conversations)
        buffer.writeInteger(unsentMessages)
        buffer.writeInteger(timeToLiveSeconds)
        buffer.writeInteger(retentionDays)
        buffer.writeBool(isReplicating)
        buffer.writeOptionalU64(heldOperations)
        buffer.writeOptionalU64(unsyncedOperations)
        buffer.writeBool(discovery)
        buffer.writeList(discoveryInterfaces) { buffer, name in buffer.writeControlText(name, limit: ControlConstants.maxShortTextByteCount) }
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> NodeStatus {
        NodeStatus(
            user: try buffer.readUser("user"),
            displayName: try buffer.readControlText("display name", limit: ControlConstants.maxShortTextByteCount),
            listenAddress: try buffer.readControlText("listen address", limit: ControlConstants.maxShortTextByteCount),
            startedAt: try buffer.readU64("start time"),
            connectedPeers: try buffer.readU32("connected peers"),
            conversations: try buffer.readU32("conversations"),
            unsentMessages: try buffer.readU32("unsent messages"),
            timeToLiveSeconds: try buffer.readU32("time to live"),
            retentionDays: try buffer.readU32("retention days"),
            isReplicating: try buffer.readBool("replicating"),
            heldOperations: try buffer.readOptionalU64("held operations"),
            unsyncedOperations: try buffer.readOptionalU64("unsynced operations"),
            discovery: try buffer.readBool("discovery"),
            discoveryInterfaces: try buffer.readList("discovery interfaces") { buffer throws(ControlFailure) in
                try buffer.readControlText("interface", limit: ControlConstants.maxShortTextByteCount)
            })
    }
}
