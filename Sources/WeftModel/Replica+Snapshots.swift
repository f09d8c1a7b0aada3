extension Replica {
    /// The conversation `id` resolves to (its canonical conversation), as it stands.
    public func conversation(_ id: ConversationID) -> ConversationSnapshot? {
        let members = members(ofGroupContaining: id).compactMap { logs[$0] }
        guard let canonical = members.first, let creation = canonical.creation else { return nil }

        // Remove wins across the group too: a user is a participant if some log admits them and
        // no log that names them has them removed.
        var participants: [UserID] = []
        for user in members.reduce(into: Set<UserID>(), { $0.formUnion($1.everyone) }) {
            let naming = members.filter { $0.names(user) }
            if naming.allSatisfy({ $0.isParticipant(user, at: $0.frontier) }) { participants.append(user) }
        }

        var metadata: [String: ConversationLog.MetadataValue] = [:]
        for log in members {
            for value in log.metadata.values {
                if let current = metadata[value.key], !ConversationLog.lastWriterWins(value, over: current) { continue }
                metadata[value.key] = value
            }
        }

        let live = members.flatMap { log in log.messages.values.filter { !log.deleted.contains($0.id) }.map { (log, $0) } }
        let unread = localUser.map { user in
            live.filter { log, message in message.sender != user && !Self.hasRead(user, message, in: log) }.count
        } ?? 0

        return ConversationSnapshot(
            id: canonical.id,
            mergedIDs: members.dropFirst().map(\.id).sorted(),
            creator: creation.author,
            createdAt: creation.timestamp,
            participants: participants.sorted(),
            isDistinct: members.allSatisfy { $0.creation?.distinct == true && !$0.hadMembershipChange },
            metadata: Dictionary(uniqueKeysWithValues: metadata.values.compactMap { entry in entry.value.map { (entry.key, $0) } }),
            messageCount: live.count,
            unreadCount: unread,
            lastMessageAt: live.map(\.1.timestamp).max())
    }

    /// Every conversation, canonical ones only.
    public var conversations: [ConversationSnapshot] { conversationIDs.compactMap(conversation) }

    /// The messages of the conversation `id` resolves to, in conversation order.
    public func messages(in id: ConversationID) -> [MessageSnapshot] {
        guard let snapshot = conversation(id) else { return [] }
        let members = ([snapshot.id] + snapshot.mergedIDs).compactMap { logs[$0] }
        let live = members.flatMap { log in log.messages.values.filter { !log.deleted.contains($0.id) }.map { (log, $0) } }
            .sorted { MessageSnapshot.precedes(($0.1.timestamp, $0.1.sender, $0.1.id), ($1.1.timestamp, $1.1.sender, $1.1.id)) }
        return live.enumerated().map { position, entry in
            let (log, message) = entry
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
