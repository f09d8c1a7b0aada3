/// The sync core's bounds and timings (SPEC.md §14.10). Defaults are the protocol's; tests
/// may shorten the timings.
public struct SyncConfiguration: Sendable, Hashable {
    /// Bytes of messages kept for a peer whose channel is not writable. Past it the peer is
    /// *behind*: the core stops queueing its operations and later resends them from the store.
    public var maxQueuedBytesPerPeer = 4 << 20
    /// Pending operations (causes missing) a peer identity may make this node hold, over all
    /// its connections; past it, the peer's operations that are not next in their author's
    /// chain are dropped.
    public var maxPendingOperationsPerPeer = 10_000
    /// The same bound in wire bytes.
    public var maxPendingBytesPerPeer = 64 << 20
    /// How long an announced operation (IHAVE) may take to arrive before the node asks the
    /// announcer for it (GRAFT), at least; also the least time between two requests for
    /// missing causes. The core waits longer when eager pushes arrive later than this
    /// (`SyncCore.graftTimeout`), up to `maxGraftTimeoutMilliseconds`.
    public var graftTimeoutMilliseconds: UInt64 = 500
    /// The longest graft timeout the core adapts to.
    public var maxGraftTimeoutMilliseconds: UInt64 = 5_000
    /// How often the node reconciles with each connected peer again (anti-entropy), besides
    /// on connect: the repair for lost messages.
    public var antiEntropyIntervalMilliseconds: UInt64 = 30_000
    /// Bodies are split before they pass this many bytes (one operation may exceed it).
    public var messageBodySoftLimit = 256 << 10
    /// Announced operations waiting to arrive, at most; more announcements are ignored.
    public var maxMissingOperations = 100_000
    /// Of those, at most this many first announced by one peer identity (across its
    /// connections), and at most this many in one log: one member cannot fill the table.
    public var maxMissingOperationsPerPeer = 16_384
    public var maxMissingOperationsPerLog = 16_384
    /// Missing causes remembered to ask one peer for, per log and over all logs; past them
    /// the log is asked for past this node's heads instead (which names no identifier).
    public var maxCauseRequestsPerLog = 4_096
    public var maxCauseRequestsPerPeer = 16_384
    /// Reads from the store (a log past heads, or operations by identifier) one peer may have
    /// under way at once; more of its requests wait, bounded, until the reads finish and it
    /// takes what they sent.
    public var maxStoreReadsPerPeer = 2
    /// Operations a peer asked for by identifier that wait for its reads to finish, at most;
    /// past it its requests by identifier are dropped (it asks again, or anti-entropy finds them).
    public var maxDeferredIDsPerPeer = 65_536
    /// Logs not held here whose heads on peers the core remembers (for `unsynced`), at most.
    public var maxUnheldLogsKnown = 65_536
    /// Identifiers of recently received operations kept to spot duplicates before the store.
    public var recentOperationCapacity = 32_768
    /// Identifiers kept per peer of operations it holds past its known heads.
    public var knownOperationCapacityPerPeer = 4_096
    /// A peer's SUMMARY may list at most this many logs.
    public var maxSummaryEntries = 1_000_000
    /// HAVE messages answered per peer per anti-entropy interval. A reconciliation of n
    /// differing logs among N takes about log16(N) + n / 4096 rounds, so this covers millions
    /// of new logs; a peer that keeps going past it is ignored until the next interval.
    public var maxReconciliationRoundsPerInterval = 1_024
    /// Differing conversations a reconciliation gathers before the node asks for them (WANT)
    /// without waiting for its end: what it keeps per peer stays bounded.
    public var maxDifferingPerRequest = 65_536

    public init() {}
}
