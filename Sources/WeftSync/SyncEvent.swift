import WeftModel

/// A connection to a peer, numbered by the driver: not the peer (its `UserID`), which keeps its
/// identity across connections. A peer that reconnects gets a new number.
public typealias ConnectionNumber = UInt64

/// What happens to a node, as the sync core sees it (SPEC.md §14.10). The driver turns
/// socket events, store commits and its timer into these.
public enum SyncEvent: Sendable {
    /// A peer finished the handshake (§3) as `user`.
    case connected(ConnectionNumber, user: UserID)
    /// The connection to a peer ended (in any way).
    case disconnected(ConnectionNumber)
    /// A decoded DATA payload from a peer.
    case received(ConnectionNumber, SyncMessage)
    /// The store committed operations: received from a peer, or written locally.
    case stored(StoreOutcome)
    /// The peer's channel can (true) or cannot (false) take more bytes without buffering.
    case writable(ConnectionNumber, Bool)
    /// The driver finished one read from the store that `.sendStored` or
    /// `.sendStoredOperations` asked for, and queued what it read for the peer.
    case storeReadDone(ConnectionNumber)
    /// Pending operations the store deleted (expired, or past its bound per log) without
    /// applying them: they no longer count against the peers that sent them, and a copy
    /// offered again is taken again.
    case pendingDropped([OperationID])
    /// The periodic timer, with a monotonic time: drives announcement timeouts (GRAFT) and
    /// anti-entropy rounds. Every few hundred milliseconds is enough.
    case tick(nowMilliseconds: UInt64)
}

/// What the sync core asks the driver to do.
public enum SyncAction: Sendable, Equatable {
    /// Send this message to the peer (encode it into one DATA frame). OPERATIONS the core
    /// sends have passed the §13.3 removal rule already.
    case send(ConnectionNumber, SyncMessage)
    /// Verify and store these operations (`LocalAuthor.receive`), then report a `.stored` event.
    case apply([SignedOperation], from: ConnectionNumber)
    /// Read the held operations of the log above `beyond` from the store, in causal order,
    /// and send them as OPERATIONS (not pushed) in messages that fit a DATA frame, less those
    /// in `skipping` (the peer said it holds them).
    ///
    /// Every read for a peer carries the removal rule as it applies to the peer's user
    /// (§13.3), nil when it withholds nothing from them: the driver drops what it withholds,
    /// judged on each operation's causal past as the store holds it
    /// (`Withholding.filter(_:pasts:)`).
    case sendStored(ConnectionNumber, ConversationID, beyond: VersionVector, skipping: HeldOperations, withholding: Withholding? = nil)
    /// Read these operations from the store (those held) and send them as OPERATIONS.
    ///
    /// Each `.sendStored` and `.sendStoredOperations` is one read; the driver reports its end
    /// with `.storeReadDone`. The core has at most `maxStoreReadsPerPeer` of them under way
    /// per peer, and none while the peer is not writable: what the peer asks for meanwhile
    /// waits, bounded, in the core.
    case sendStoredOperations(ConnectionNumber, [OperationID], withholding: Withholding? = nil)
    /// Read the local user's messages that wait in the outbox (no peer acknowledged them) and
    /// send them as OPERATIONS (not pushed): a peer that holds them already answers STORED
    /// all the same. Issued once per connection, when it starts: an acknowledgement lost with
    /// an earlier connection is otherwise never repaired, and the message never *sent*. One
    /// read, like `.sendStored`.
    case resendWaiting(ConnectionNumber, withholding: Withholding? = nil)
    /// The peer acknowledged storing the operations in these slots (STORED), operations this
    /// node sent it: a message of the local user among them is now *sent*. The store maps the
    /// slots back to its messages (`Store.markSent(acknowledged:)`).
    case acknowledged([SlotRange], by: ConnectionNumber)
    /// Operations from the peer refused before storing, beyond a bound; log the reason.
    case dropped(ConnectionNumber, count: Int, reason: String)
    /// The peer broke the protocol: close the connection (ERROR, then close).
    case close(ConnectionNumber, reason: String)
}

/// What one store commit did, as the driver reports it in `.stored`.
public struct StoreOutcome: Sendable {
    /// The new summary of every log the commit touched.
    public var summaries: [LogSummary]
    /// Operations the commit stored for the first time (in any status), local or received.
    public var stored: [SignedOperation]
    /// Operations of the batch the store already held.
    public var duplicates: Int
    /// Their identifiers, where the driver knows them.
    public var duplicateIDs: [OperationID] = []
    /// Operations of the batch that were stored pending (causes missing).
    public var pending: Int
    /// Those of `stored` that are pending: kept, acknowledged, but not pushed or announced
    /// (§14.8), so a member cannot make every node of the mesh hold its operations with
    /// made-up causes by sending them to one.
    public var pendingIDs: Set<OperationID> = []
    /// The wire bytes of those pending operations.
    public var pendingByteCount: Int
    /// Operations of the batch refused before storing (bad signature, timestamp too far
    /// ahead): the core forgets it saw them, so the genuine operation is taken later.
    public var refused: [OperationID]
    /// The peer the operations came from; nil for the local user's.
    public var source: ConnectionNumber?
    /// Per log, causes of this batch's pending operations that the store does not hold: the
    /// core asks the source for exactly these (after the graft timeout, if still missing).
    /// Empty when the store does not say; the core then asks for the log past its heads.
    public var missingCauses: [ConversationID: [OperationID]] = [:]
    /// What the removal rule (§13.3) is told after this commit: the membership of every log of
    /// each merge group that holds a removal and that this commit changed the membership of
    /// (`Replica.membershipFacts(forGroupsOf:)`). Empty when none changed.
    public var memberships: [LogMembership] = []
    /// How many operations the whole commit stored per log, when the commit is reported in
    /// several outcomes (one per source) and this one carries its summaries: heads that moved
    /// further than these released pending operations. Nil: counted from `stored`.
    public var storedPerLog: [ConversationID: Int]?

    public init(
        summaries: [LogSummary], stored: [SignedOperation], duplicates: Int = 0, pending: Int = 0,
        pendingByteCount: Int = 0, refused: [OperationID] = [], source: ConnectionNumber? = nil
    ) {
        self.summaries = summaries
        self.stored = stored
        self.duplicates = duplicates
        self.pending = pending
        self.pendingByteCount = pendingByteCount
        self.refused = refused
        self.source = source
    }
}
