extension Replica {
    /// The conversation `id` resolves to (its canonical conversation), as it stands.
    public func conversation(_ id: ConversationID) -> ConversationSnapshot? {
        // A partial replica answers from the logs it holds: a store loads a group's logs before
        // it applies, and builds local operations again when the first build read a missing one.
        let members = members(ofGroupContaining: id).compactMap { logs[$0] }
        guard let canonical = members.first, let creation = canonical.creation else { return nil }

        let participants = Self.participants(of: members)
        // Unread counts only while the local user takes part: a user removed (or who left)
        // cannot mark anything read any more (§13.3), so nothing stays unread for them.
        let countsUnread = localUser.map { participants.contains($0) } ?? false

        var metadata: [String: ConversationLog.MetadataValue] = [:]
        for log in members {
            for value in log.metadata.values {
                if let current = metadata[value.key], !ConversationLog.lastWriterWins(value, over: current) { continue }
                metadata[value.key] = value
            }
        }

        var messageCount = 0
        var unread = 0
        var lastMessageAt: HLCTimestamp?
        for log in members {
            for message in log.messages.values where !log.deleted.contains(message.id) {
                messageCount += 1
                if lastMessageAt.map({ $0 < message.timestamp }) ?? true { lastMessageAt = message.timestamp }
                if countsUnread, let user = localUser, message.sender != user, !Self.hasRead(user, message, in: log) { unread += 1 }
            }
        }

        return ConversationSnapshot(
            id: canonical.id,
            mergedIDs: members.dropFirst().map(\.id).sorted(),
            creator: creation.author,
            createdAt: creation.timestamp,
            participants: participants.sorted(),
            isDistinct: members.allSatisfy { $0.creation?.distinct == true && !$0.hadMembershipChange },
            metadata: Dictionary(uniqueKeysWithValues: metadata.values.compactMap { entry in entry.value.map { (entry.key, $0) } }),
            messageCount: messageCount,
            unreadCount: unread,
            lastMessageAt: lastMessageAt)
    }

    /// The participants of a merge group (its logs, canonical first). Remove wins across the
    /// group too: a user is a participant if some log admits them and no log that names them
    /// has them removed.
    static func participants(of members: [ConversationLog]) -> Set<UserID> {
        guard members.count > 1 else { return members.first?.participants ?? [] }
        var participants: Set<UserID> = []
        for user in members.reduce(into: Set<UserID>(), { $0.formUnion($1.participants) })
        where members.allSatisfy({ !$0.named.contains(user) || $0.participants.contains(user) }) {
            participants.insert(user)
        }
        return participants
    }

    /// Whether `user` is a participant of the merge group of `id` now, without building its
    /// snapshot (which counts its messages).
    func takesPart(_ user: UserID, inGroupOf id: ConversationID) -> Bool {
        Self.participants(of: members(ofGroupContaining: id).compactMap { logs[$0] }).contains(user)
    }

    /// Every conversation, canonical ones only.
    public var conversations: [ConversationSnapshot] { conversationIDs.compactMap(conversation) }

    /// The messages of the conversation `id` resolves to, in conversation order.
    public func messages(in id: ConversationID) -> [MessageSnapshot] {
        guard let snapshot = conversation(id) else { return [] }
        let members = ([snapshot.id] + snapshot.mergedIDs).compactMap { logs[$0] }
        var live: [(member: Int, message: ConversationLog.Message)] = []
        for (member, log) in members.enumerated() {
            for message in log.messages.values where !log.deleted.contains(message.id) { live.append((member, message)) }
        }
        live.sort { MessageSnapshot.precedes(($0.message.timestamp, $0.message.sender, $0.message.id), ($1.message.timestamp, $1.message.sender, $1.message.id)) }
        return live.enumerated().map { position, entry in
            let (log, message) = (members[entry.member], entry.message)
            var status: [UserID: RecipientStatus] = [:]
            for user in snapshot.participants where user != message.sender {
                status[user] = Self.status(of: message, for: user, in: log)
            }
            return MessageSnapshot(
                id: message.id, conversation: snapshot.id, postedTo: log.id, sender: message.sender,
                sentAt: message.timestamp, parts: message.parts, options: message.options, position: position,
                recipientStatus: status)
        }
    }

    /// One message, wherever it is.
    public func message(_ id: OperationID) -> MessageSnapshot? {
        guard let log = logs.values.first(where: { $0.messages[id] != nil }), !log.deleted.contains(id) else { return nil }
        return messages(in: log.id).first { $0.id == id }
    }

    /// Read by an explicit receipt or by a watermark whose past holds the message (§13.6).
    static func hasRead(_ user: UserID, _ message: ConversationLog.Message, in log: ConversationLog) -> Bool {
        if log.read[message.id]?.contains(user) == true { return true }
        guard let watermark = log.watermarks[user], let sequence = log.records[message.id]?.sequence else { return false }
        return watermark.includes(author: message.sender, sequence: sequence)
    }

    static func status(of message: ConversationLog.Message, for user: UserID, in log: ConversationLog) -> RecipientStatus {
        if hasRead(user, message, in: log) { return .read }
        if log.delivered[message.id]?.contains(user) == true { return .delivered }
        return .sent
    }
}
