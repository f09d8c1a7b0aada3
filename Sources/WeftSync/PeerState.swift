import WeftModel

/// What the sync core keeps about one connected peer: what it is known to hold, how to push
/// to it (eager or lazy), and its outgoing queue while its channel is not writable.
struct PeerState: Sendable {
    let user: UserID

    // MARK: Knowledge

    /// Per conversation, the peer's known heads: it holds every operation of each author up
    /// to that sequence (it told us in a WANT, sent them, acknowledged them, or we sent them).
    var heads: [ConversationID: VersionVector] = [:]
    /// Operations it holds past its known heads.
    var known: RecentIDs
    /// Of those, the ones it said it holds itself (IHAVE, OPERATIONS from it), which answers
    /// to its WANT leave out. `known` also counts what this node sent it, which a lost message
    /// never brought; answers built on that would never repair the loss.
    var confirmed: RecentIDs
    /// Operations pushed to it lately: on their way, so answers to its WANT leave them out.
    var recentPushes: RecentPushes
    /// SUMMARY parts received, until the final one.
    var incomingSummary: [SyncMessage.Summary.Entry] = []
    /// The reconciliation with this peer: what it found so far, what it may still take.
    var reconciliation: ReconciliationProgress
    /// Logs the peer asked for (it found them differing, or holds operations past a gap) with
    /// heads equal to ours: heads cannot say what differs. If our next reconciliation finds
    /// them differing with our digest unchanged, it asks for the whole log. Valued by our
    /// digest at the time.
    var suspectedForks: [ConversationID: SetDigest] = [:]
    /// Whole-log requests made, by our digest when made: never twice for the same digest.
    var wholeLogRequests: [ConversationID: SetDigest] = [:]
    /// Logs whose operations from this peer came back pending: asked for past this node's
    /// heads at `due` unless the gap closed by itself (the causes were on their way).
    var causeRequests: [ConversationID: CauseRequest] = [:]
    /// When the last anti-entropy interval with this peer began (connect, then every interval).
    var lastReconciliation: UInt64

    // MARK: Push

    /// Eager peers get new operations at once; lazy ones get IHAVE (Plumtree).
    var isEager = true

    // MARK: Flow control

    var isWritable = true
    /// Messages waiting for the channel to become writable, oldest first.
    var queue: [SyncMessage] = []
    var queuedBytes = 0
    /// Conversations with operations the peer was not sent (its queue was full, or it asked
    /// while not writable): once writable, they are sent from the store past `heads`.
    var behind: Set<ConversationID> = []
    /// Reads from the store under way for the peer (`SyncConfiguration.maxStoreReadsPerPeer`).
    var storeReads = 0
    /// Operations it asked for by identifier while it could take no more reads: read once
    /// it can. Bounded by `maxDeferredIDsPerPeer`.
    var deferredIDs: [OperationID] = []
    /// Missing causes held in `causeRequests`, over all logs.
    var causeRequestCount = 0

    init(user: UserID, knownCapacity: Int, now: UInt64) {
        self.user = user
        self.known = RecentIDs(capacity: knownCapacity)
        self.confirmed = RecentIDs(capacity: knownCapacity)
        self.recentPushes = RecentPushes(capacity: knownCapacity)
        self.lastReconciliation = now
        self.reconciliation = ReconciliationProgress(roundsLeft: 0)
    }

    struct CauseRequest: Hashable, Sendable {
        var due: UInt64
        /// The log's heads when the request was scheduled: no progress by `due` means ask.
        var heads: VersionVector
        /// The missing causes the store named: asked for by identifier, those still missing
        /// at `due`. Empty: the store did not say, so the log past its heads is asked for.
        var causes: Set<OperationID> = []
        /// More causes were named than the bounds keep: the log is asked for past its heads too.
        var askPastHeads = false
    }

    /// Range-based reconciliation with the peer (SPEC.md §14.3, §14.10). The rounds carry no
    /// session: what they settle is gathered here until a round ends the reconciliation.
    struct ReconciliationProgress: Sendable {
        /// HAVE messages this node still answers in this anti-entropy interval.
        var roundsLeft: Int
        /// Differing conversations settled and not asked for yet.
        var found: Set<ConversationID> = []
    }

    /// Whether the peer is known to hold `operation` (or another operation in its slot: a
    /// fork is found by reconciliation, not here).
    func holds(_ operation: SignedOperation) -> Bool {
        let op = operation.operation
        return heads[op.conversation]?[op.author] ?? 0 >= op.sequence || known.contains(operation.id)
    }

    /// Records that the peer holds `operation`.
    mutating func record(_ operation: SignedOperation) {
        let op = operation.operation
        let head = heads[op.conversation]?[op.author] ?? 0
        if op.sequence == head + 1 {
            heads[op.conversation, default: VersionVector()].set(op.author, op.sequence)
        } else if op.sequence > head {
            known.insert(operation.id)
        }
    }

    /// Records that the peer said it holds `id` (it announced it, or sent it).
    mutating func confirm(_ id: OperationID) { confirmed.insert(id) }

    /// Records that the peer holds an operation in each slot of `range` (it acknowledged them):
    /// its head moves if the range starts at or below the slot after it. A range past a gap
    /// says nothing the heads can keep.
    mutating func record(_ range: SlotRange) {
        let head = heads[range.conversation]?[range.author] ?? 0
        guard range.sequences.lowerBound == 0 || range.sequences.lowerBound - 1 <= head, range.sequences.upperBound > head else { return }
        heads[range.conversation, default: VersionVector()].set(range.author, range.sequences.upperBound)
    }

    /// Records that the peer holds at least `vector` of a conversation.
    mutating func record(_ vector: VersionVector, in conversation: ConversationID) {
        heads[conversation, default: VersionVector()].formJoin(vector)
    }

    var isBehind: Bool { !behind.isEmpty }

    /// Whether the peer has work waiting for a read from the store.
    var hasDeferredReads: Bool { !behind.isEmpty || !deferredIDs.isEmpty }
}
