/// A recipient's status for one message, from the sender's point of view: invalid < pending <
/// sent < delivered < read. `pending` is the sender's own node before the mesh has the message.
public enum RecipientStatus: Int, Comparable, Sendable, CustomStringConvertible {
    case invalid = 0, pending, sent, delivered, read

    public static func < (lhs: RecipientStatus, rhs: RecipientStatus) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .invalid: "invalid"
        case .pending: "pending"
        case .sent: "sent"
        case .delivered: "delivered"
        case .read: "read"
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
}

extension MessageSnapshot {
    /// The message order of SPEC.md §13.5: timestamp, then sender, then identifier.
    static func precedes(_ a: (HLCTimestamp, UserID, OperationID), _ b: (HLCTimestamp, UserID, OperationID)) -> Bool {
        if a.0 != b.0 { return a.0 < b.0 }
        if a.1 != b.1 { return a.1 < b.1 }
        return a.2 < b.2
    }
}
