import WeftModel

/// The replication core of one node (SPEC.md §14.10): events in, actions out. No sockets, no
/// clock, no randomness: the driver feeds it socket events, store commits and timer ticks,
/// and carries out its actions, so it runs the same over SwiftNIO and in a simulated network.
///
/// It keeps what each connected peer is known to hold and never sends a peer an operation it
/// knows the peer has; pushes new operations along a spanning tree of eager links and
/// announces them on the others (Plumtree); reconciles on connect and every anti-entropy
/// interval; bounds what a peer can make it buffer or hold pending.
public struct SyncCore: Sendable {
    public let configuration: SyncConfiguration
    public let localUser: UserID

    /// Every log the store holds, published or not, as the store last reported it.
    var logs: [ConversationID: LogSummary] = [:]
    /// The published, unpruned logs by digest: what reconciliation (HAVE) compares. Kept in
    /// step with `logs`, O(log n) per changed digest.
    var reconciliationSet: ReconciliationSet
    var peers: [ConnectionNumber: PeerState] = [:]
    /// Per conversation, the highest heads any peer was known to hold: what `unsynced` counts.
    var bestKnownHeads: [ConversationID: VersionVector] = [:]
    /// Operations received lately (handed to the store, or stored): a second copy is a duplicate.
    var recent: RecentIDs
    /// Operations announced by IHAVE and not received yet.
    var missing: [OperationID: MissingOperation] = [:]
    /// Entries of `missing` by the identity that first announced them, and by log: what the
    /// per-peer and per-log bounds count.
    var missingByUser: [UserID: Int] = [:]
    var missingByLog: [ConversationID: Int] = [:]
    /// Operations each peer identity sent that the store holds pending, over all its
    /// connections (a peer that reconnects does not start afresh).
    var pendingByUser: [UserID: PendingCount] = [:]
    /// Operations each peer identity sent that are on their way to the store and not next in
    /// their author's chain (likely pending): counted against the bound until the store says,
    /// so a burst of messages cannot pass it before the first commit.
    var unsettledByUser: [UserID: Set<OperationID>] = [:]
    /// Creations received and on their way to the store, by the log they create (and back):
    /// the operations that follow them, in later messages, continue a chain rather than start
    /// one in a log not held. At most `maxCreationsInFlight`.
    var creationsInFlight: [ConversationID: OperationID] = [:]
    var creationLogs: [OperationID: ConversationID] = [:]
    static let maxCreationsInFlight = 65_536
    /// The identities of connections that ended lately: a commit of what one of them sent may
    /// come after its end, and still counts against its identity. The last 1,024.
    var departed: [ConnectionNumber: UserID] = [:]
    /// The §13.3 removal rule, from the memberships the store reports: what must not go to
    /// the node of a user removed from a conversation.
    var removalRule: RemovalRule
    var departedOrder: [ConnectionNumber] = []
    /// How late eager pushes arrive after the first announcement of the same operation: a
    /// maximum that decays by a sixty-fourth at each new observation below it (§14.8).
    var pushLateness: UInt64 = 0
    /// Operations grafted lately, with when they were first announced: a push of one that
    /// arrives after all says how late pushes are. Bounded (cleared past 4,096).
    var grafted: [OperationID: UInt64] = [:]
    /// The time of the last tick.
    var now: UInt64 = 0
    public internal(set) var statistics = SyncStatistics()

    /// Actions of the event being handled, in order.
    var output: [SyncAction] = []
    /// Pushes, announcements and acknowledgements of the event being handled, per peer: sent
    /// as one message of each kind per peer when the event is done.
    var outgoing: [ConnectionNumber: OutgoingBatch] = [:]

    /// A core for a node whose store holds `summaries` (from `Store.logSummaries()`) and the
    /// merge groups with removals that `memberships` describes (`Store.membershipFacts()`),
    /// with no peer connected: what a node builds at start, and after a restart.
    public init(
        configuration: SyncConfiguration = SyncConfiguration(), localUser: UserID, summaries: [LogSummary],
        memberships: [LogMembership] = []
    ) {
        self.removalRule = RemovalRule(memberships)
        self.configuration = configuration
        self.localUser = localUser
        self.recent = RecentIDs(capacity: configuration.recentOperationCapacity)
        for summary in summaries { logs[summary.conversation] = summary }
        self.reconciliationSet = ReconciliationSet(published: logs.values)
    }

    /// Handles one event and returns the actions it calls for, in order.
    public mutating func handle(_ event: SyncEvent) -> [SyncAction] {
        switch event {
        case .connected(let peer, let user):
            peers[peer] = PeerState(user: user, knownCapacity: configuration.knownOperationCapacityPerPeer, now: now)
            startReconciliation(with: peer)
            output.append(.resendWaiting(peer, withholding: removalRule.restricted(to: user)))
            peers[peer]?.storeReads += 1
        case .disconnected(let peer):
            if let user = peers.removeValue(forKey: peer)?.user {
                departed[peer] = user
                departedOrder.append(peer)
                if departedOrder.count > 1_024 { departed[departedOrder.removeFirst()] = nil }
            }
            outgoing[peer] = nil
        case .received(let peer, let message):
            guard peers[peer] != nil else { break }
            receive(message, from: peer)
        case .stored(let outcome):
            stored(outcome)
        case .writable(let peer, let isWritable):
            setWritable(peer, isWritable)
        case .storeReadDone(let peer):
            storeReadDone(peer)
        case .pendingDropped(let ids):
            for id in ids { recent.remove(id) }
            releasePending(ids.count)
        case .tick(let nowMilliseconds):
            tick(nowMilliseconds)
        }
        flushOutgoing()
        defer { output = [] }
        return output
    }

    private mutating func receive(_ message: SyncMessage, from peer: ConnectionNumber) {
        switch message {
        case .have(let have):
            receiveHave(have, from: peer)
        case .summary(let part):
            receiveSummary(part, from: peer)
        case .want(let want):
            receiveWant(want, from: peer)
        case .operations(let operations):
            receiveOperations(operations, from: peer)
        case .stored(let ranges):
            // Knowledge is kept for logs held here only (bounded by them, not by the peer).
            for range in ranges where logs[range.conversation] != nil { peers[peer]?.record(range) }
            output.append(.acknowledged(ranges, by: peer))
        case .ihave(let announcements):
            receiveAnnouncements(announcements, from: peer)
        case .prune:
            peers[peer]?.isEager = false
        case .names:
            // Display names are not replication state: the node's name directory takes them
            // (§14.12), and its driver does not hand them here.
            break
        case .content:
            // Content transfer is not replication: the node's content service takes it
            // (§17.8), and the driver does not hand it here.
            break
        }
    }

    // MARK: - Queries

    /// How many operations of the log are known to exist on some peer but are not held here:
    /// over the log's authors, the best head a peer was known to hold less this node's, where
    /// positive. Known heads come from WANT, OPERATIONS and IHAVE (§14.10).
    public func unsynced(_ conversation: ConversationID) -> Int {
        guard let best = bestKnownHeads[conversation] else { return 0 }
        let own = logs[conversation]?.heads ?? VersionVector()
        var total: UInt64 = 0
        for (author, sequence) in best.entries where sequence > own[author] { total += sequence - own[author] }
        return Int(clamping: total)
    }

    /// What the core knows of a connected peer (for `weft peers`); nil for an unknown peer.
    public func peerKnowledge(_ peer: ConnectionNumber) -> PeerKnowledge? {
        guard let state = peers[peer] else { return nil }
        return PeerKnowledge(
            user: state.user, isEager: state.isEager, isWritable: state.isWritable, isBehind: state.isBehind,
            queuedBytes: state.queuedBytes, pendingOperations: pendingByUser[state.user]?.operations ?? 0, heads: state.heads)
    }

    /// The connected peers, in order.
    public var connectedPeers: [ConnectionNumber] { peerOrder }

    /// The connected peers in a fixed order, so that the same events give the same actions.
    var peerOrder: [ConnectionNumber] { peers.keys.sorted() }

    /// The log summaries the core works from (as the store last reported them).
    public func summary(of conversation: ConversationID) -> LogSummary? { logs[conversation] }
}

/// What the core knows of a connected peer.
public struct PeerKnowledge: Sendable, Hashable {
    public var user: UserID
    /// Whether new operations are pushed to it (else announced).
    public var isEager: Bool
    public var isWritable: Bool
    /// Whether operations wait to be resent to it from the store (its queue overflowed).
    public var isBehind: Bool
    public var queuedBytes: Int
    /// Operations taken from its identity (over all its connections) that the store holds pending.
    public var pendingOperations: Int
    /// Per conversation, the operations it is known to hold (per author, up to a sequence).
    public var heads: [ConversationID: VersionVector]
}

/// Counters a node's tests and benchmarks read.
public struct SyncStatistics: Sendable, Hashable {
    public init() {}

    /// Operations that arrived in OPERATIONS messages, duplicates included.
    public var operationsReceived = 0
    /// Arrivals of operations already held (seen by the core, or reported by the store).
    public var duplicatesReceived = 0
    /// Of those, the ones seen by the core in OPERATIONS that were not pushed (answers to
    /// WANT, logs published or sent from the store).
    public var duplicatesAnswered = 0
    /// Of all duplicates, the ones of operations this node asked for with a graft: the push
    /// and the graft's answer both arrived.
    public var duplicatesGrafted = 0
    /// Operations sent in pushed OPERATIONS.
    public var operationsPushed = 0
    /// Operations announced in IHAVE.
    public var operationsAnnounced = 0
    /// Announced operations asked for after the timeout (GRAFT).
    public var grafts = 0
    public var prunesSent = 0
    /// Operations refused past the pending bound.
    public var operationsDropped = 0
    /// Messages not queued for a peer past its queue bound.
    public var messagesNotQueued = 0
    /// Operations a peer asked for by identifier, not read: too many of its requests waited.
    public var requestsDropped = 0
    /// Reconciliations started (HAVE sent on connect or anti-entropy).
    public var reconciliations = 0
    /// HAVE messages not answered: the peer was past its rounds for the interval.
    public var reconciliationRoundsIgnored = 0
    /// WANT entries asking for a log past heads: after pending operations (causes), and
    /// after reconciliation.
    public var causeRequests = 0
    public var reconciliationRequests = 0
    /// Logs read from the store past a peer's heads and sent to it (WANTs answered, a log
    /// published, a peer that fell behind caught up).
    public var logsSentFromStore = 0
}

/// An operation announced by IHAVE and not received yet.
struct MissingOperation: Sendable {
    var conversation: ConversationID
    var author: UserID
    var sequence: UInt64
    /// Peers that announced it, in order; the first still connected is asked.
    var announcers: [ConnectionNumber]
    /// The identity of the first announcer: whose bound the entry counts against.
    var firstAnnouncer: UserID
    var deadline: UInt64
    var requests = 0
    /// When the first announcement arrived.
    var announcedAt: UInt64
}

/// Operations a peer identity sent that the store holds pending, and their wire bytes.
struct PendingCount: Sendable, Hashable {
    var operations = 0
    var bytes = 0
}

/// What one event sends a peer besides its own messages.
struct OutgoingBatch: Sendable {
    var pushes: [SignedOperation] = []
    var announcements: [SyncMessage.Announcement] = []
    /// Operations received from the peer and held: acknowledged by slot (STORED).
    var acknowledgements: [Operation] = []
}

extension SyncCore {
    /// Operations held over all logs (as the store last reported them).
    public var heldOperationCount: Int { logs.values.reduce(0) { $0 + $1.operationCount } }

    /// `unsynced` over every log some peer was known to hold.
    public var unsyncedTotal: Int { bestKnownHeads.keys.reduce(0) { $0 + unsynced($1) } }
}
