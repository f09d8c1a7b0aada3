import WeftSync

/// How a node replicates: the sync core's bounds, and the driver's timings.
public struct ReplicationConfiguration: Sendable {
    /// The sync core's bounds and timings (SPEC.md §14.10).
    public var sync = SyncConfiguration()
    /// How long received operations gather before they are stored together: one commit, and
    /// one delivered receipt per conversation, for everything that arrived meanwhile.
    public var flushInterval: Duration = .milliseconds(20)
    /// At most this many operations are stored in one commit.
    public var maxFlushOperations = 8_192
    /// Received operations waiting to be stored, at most: past it the node stops reading its
    /// peers until the store catches up (TCP then slows them down).
    public var maxUnstoredOperations = 32_768
    /// Events waiting for the sync core's driver, at most: past it, whatever feeds the core
    /// (the connections' reader, the storer, the writers, the timers) waits for room.
    public var maxQueuedEvents = 64
    /// How often the sync core's timers run (lazy-push timeouts, anti-entropy).
    public var tickInterval: Duration = .milliseconds(100)
    /// Bytes written to a peer's connection but not yet taken by it, past which the core is
    /// told the peer is not writable (it then queues, and past its own bound resends from
    /// the store later); told writable again below `lowWatermark`.
    public var highWatermark = 1 << 20
    public var lowWatermark = 256 << 10
    /// How often messages whose time to live ran out are failed.
    public var expiryInterval: Duration = .seconds(5)
    /// How long a relayed conversation (whose participant the local user never was) is kept
    /// after its last activity.
    public var retention: Duration = .seconds(30 * 24 * 3600)
    /// How often pending operations past the store's lifetime for them are deleted.
    public var pendingSweepInterval: Duration = .seconds(60)
    /// How often relayed conversations past the retention are pruned.
    public var pruneInterval: Duration = .seconds(3600)
    /// How long after a connection ends the node gives the memory it freed back to the
    /// system (`HeapTrim`): by then its reader, writer and channel have let go of their buffers.
    public var heapTrimDelay: Duration = .seconds(2)

    public init() {}
}
