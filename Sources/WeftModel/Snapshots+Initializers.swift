// Public initializers for the snapshot types (the synthesized memberwise ones are internal; these
// take the identifier unlabelled so they do not clash with them) and the read-state question a store asks, so a
// store outside this module can rebuild snapshots from its own tables (SQLite) and keep a
// per-message unread flag equal to what the replica says.

extension ConversationSnapshot {
    public init(
        _ id: ConversationID, mergedIDs: [ConversationID], creator: UserID, createdAt: HLCTimestamp,
        participants: [UserID], isDistinct: Bool, metadata: [String: String], messageCount: Int, unreadCount: Int,
        lastMessageAt: HLCTimestamp?
    ) {
        self.id = id
        self.mergedIDs = mergedIDs
        self.creator = creator
        self.createdAt = createdAt
        self.participants = participants
        self.isDistinct = isDistinct
        self.metadata = metadata
        self.messageCount = messageCount
        self.unreadCount = unreadCount
        self.lastMessageAt = lastMessageAt
    }
}

extension MessageSnapshot {
    public init(
        _ id: OperationID, conversation: ConversationID, postedTo: ConversationID, sender: UserID, sentAt: HLCTimestamp,
        parts: [MessagePart], options: MessageOptions, position: Int, recipientStatus: [UserID: RecipientStatus],
        failureReasons: [UserID: String] = [:]
    ) {
        self.id = id
        self.conversation = conversation
        self.postedTo = postedTo
        self.sender = sender
        self.sentAt = sentAt
        self.parts = parts
        self.options = options
        self.position = position
        self.recipientStatus = recipientStatus
        self.failureReasons = failureReasons
    }

    /// Whether `self` comes before `other` in conversation order (SPEC.md §13.5): timestamp,
    /// then sender key bytes, then identifier bytes.
    public func precedes(_ other: MessageSnapshot) -> Bool {
        Self.precedes((sentAt, sender, id), (other.sentAt, other.sender, other.id))
    }
}

extension Replica {
    /// Whether the local user has not read `message` (posted to the conversation log `postedTo`):
    /// exactly what `ConversationSnapshot.unreadCount` counts, so a store can keep one flag per
    /// message. False for the local user's own messages, unknown or deleted messages, a
    /// replica without a local user, and a conversation the local user no longer takes part in
    /// (they cannot mark it read: §13.3), as `MessageSnapshot.recipientStatus` says.
    public func isUnread(_ message: OperationID, postedTo: ConversationID) -> Bool {
        guard let user = localUser, let log = logs[postedTo], let record = log.messages[message],
            !log.deleted.contains(message), record.sender != user, takesPart(user, inGroupOf: postedTo)
        else { return false }
        return !Self.hasRead(user, record, in: log)
    }
}
