/// A recipient's status for one message, from the sender's point of view: invalid < pending <
/// sent < failed < delivered < read. `pending` is the sender's own node before the mesh has the
/// message; `failed` is the sender's own node's record that the recipient's node did not
/// deliver it in time (or refused it), which a later delivery overrides (SPEC.md §13.6). Both
/// are local: only sent, delivered and read come from the replicated state.
public enum RecipientStatus: Int, Comparable, Sendable, CustomStringConvertible {
    // The raw values are stable (the store keeps them); the order is `rank`'s.
    case invalid = 0, pending, sent, delivered, read, failed

    /// The order of the statuses: a later fact outranks an earlier one.
    private var rank: Int {
        switch self {
        case .invalid: 0
        case .pending: 1
        case .sent: 2
        case .failed: 3
        case .delivered: 4
        case .read: 5
        }
    }

    public static func < (lhs: RecipientStatus, rhs: RecipientStatus) -> Bool { lhs.rank < rhs.rank }

    public var description: String {
        switch self {
        case .invalid: "invalid"
        case .pending: "pending"
        case .sent: "sent"
        case .delivered: "delivered"
        case .read: "read"
        case .failed: "failed"
        }
    }
}

/// A conversation as the replicated state shows it: for a merge group, the canonical
/// conversation with everything from the conversations merged into it.
public struct ConversationSnapshot: Hashable, Sendable {
    public var id: ConversationID
    /// The conversations merged into this one (not including `id`), sorted.
    public var mergedIDs: [ConversationID]
    public var creator: UserID
    public var createdAt: HLCTimestamp
    public var participants: [UserID]
    public var isDistinct: Bool
    public var metadata: [String: String]
    public var messageCount: Int
    /// Messages the local user has not read (never counting their own).
    public var unreadCount: Int
    public var lastMessageAt: HLCTimestamp?
}

/// A message as the replicated state shows it.
public struct MessageSnapshot: Hashable, Sendable {
    public var id: OperationID
    /// The canonical conversation it appears in (after merges).
    public var conversation: ConversationID
    /// The conversation it was posted to.
    public var postedTo: ConversationID
    public var sender: UserID
    public var sentAt: HLCTimestamp
    public var parts: [MessagePart]
    public var options: MessageOptions
    /// Zero-based position in the conversation's order: (timestamp, sender, identifier).
    public var position: Int
    /// Status per participant other than the sender.
    public var recipientStatus: [UserID: RecipientStatus]
    /// Why each recipient whose status is `failed` failed ("expired: not delivered within
    /// 12 h", "rejected: REASON"). The store's, for the local user's messages; a replica's
    /// snapshots never fail.
    public var failureReasons: [UserID: String] = [:]
}

extension MessageSnapshot {
    /// The message order of SPEC.md §13.5: timestamp, then sender, then identifier.
    static func precedes(_ a: (HLCTimestamp, UserID, OperationID), _ b: (HLCTimestamp, UserID, OperationID)) -> Bool {
        if a.0 != b.0 { return a.0 < b.0 }
        if a.1 != b.1 { return a.1 < b.1 }
        return a.2 < b.2
    }
}
