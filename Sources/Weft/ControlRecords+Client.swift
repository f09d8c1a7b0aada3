import WeftControl
import WeftModel
import WeftStore

// The client's objects as the control protocol shows them (SPEC.md §15.5).

extension ConversationRecord {
    init(_ conversation: Conversation, unsyncedOperations: UInt64?) {
        self.init(
            id: conversation.id, creator: conversation.creator, createdAt: conversation.createdAt,
            isDistinct: conversation.isDistinct, participants: conversation.participants.sorted(),
            merged: conversation.mergedIdentifiers, metadata: conversation.metadata,
            messageCount: UInt32(clamping: conversation.totalMessageCount),
            unreadCount: UInt32(clamping: conversation.unreadMessageCount),
            lastMessageAt: conversation.lastMessageAt, unsyncedOperations: unsyncedOperations)
    }
}

extension MessageRecord {
    /// `content`: where each rich-content part's transfer stands on this node, by root; a
    /// part it does not know is ready to download (or, the local user's, awaiting upload).
    init(_ message: Message, localUser: UserID? = nil, content: [ContentRoot: ContentState] = [:]) {
        self.init(
            id: message.id, conversation: message.conversation, sender: message.sender, sentAt: message.sentAt,
            position: UInt32(clamping: message.position), isSent: message.isSent, isUnread: message.isUnread,
            parts: message.parts.map { part in
                Part(
                    mimeType: part.mimeType, size: part.byteCount,
                    inlineData: part.content == nil && part.data.count <= ControlConstants.maxInlinePartByteCount ? part.data : [],
                    content: part.content.map { descriptor in
                        content[descriptor.root] ?? ContentState(
                            root: descriptor.root.bytes, status: message.sender == localUser ? .awaitingUpload : .readyForDownload,
                            verifiedBytes: message.sender == localUser ? descriptor.byteCount : 0)
                    })
            },
            recipients: message.recipientStatus.map {
                Recipient(user: $0.key, status: DeliveryStatus($0.value), reason: message.failureReason(for: $0.key) ?? "")
            })
    }
}

extension DeliveryStatus {
    init(_ status: RecipientStatus) {
        self =
            switch status {
            case .invalid: .invalid
            case .pending: .pending
            case .sent: .sent
            case .delivered: .delivered
            case .read: .read
            case .failed: .failed
            }
    }
}

extension ChangeKind {
    init(_ kind: ObjectChange.Kind) {
        self =
            switch kind {
            case .create: .create
            case .update: .update
            case .delete: .delete
            }
    }
}

extension ControlFailure {
    /// The control code for a client error, with its sentence.
    init(_ error: WeftError) {
        let code: Code =
            switch error.code {
            case .invalidMIMEType: .invalidMIMEType
            case .noParts: .invalidArgument
            case .unknownConversation: .unknownConversation
            case .unknownMessage: .unknownMessage
            case .notAParticipant: .notAParticipant
            case .noParticipants: .noParticipants
            case .invalidIdentifier: .invalidArgument
            case .timedOut: .timedOut
            case .notPermitted: .notPermitted
            case .storage: .storageFailed
            case .tooLarge: .tooLarge
            case .contentUnavailable: .internalError
            }
        self.init(code, error.description)
    }
}

extension ControlEvent {
    /// The event one client change makes (delivery events come from `DeliveryEvent`).
    /// With `messages`, a created message's record follows its creation event.
    static func events(for change: ObjectChange, messages: Bool, localUser: UserID? = nil) -> [ControlEvent] {
        let kind = ChangeKind(change.kind)
        let property = change.property?.name ?? ""
        switch change.object {
        case .conversation(let conversation):
            return [.conversation(kind, conversation.id, property: property)]
        case .deleted(.conversation(let id)):
            return [.conversation(kind, id, property: property)]
        case .deleted(.message(let id)):
            return [.message(kind, id, conversation: nil, property: property)]
        case .message(let message):
            let event = ControlEvent.message(kind, message.id, conversation: message.conversation, property: property)
            guard messages, kind == .create else { return [event] }
            return [event, .newMessage(MessageRecord(message, localUser: localUser))]
        }
    }

    /// A delivery event as WATCH streams it: per recipient. *sent* is about the message, so
    /// it goes once for each of its recipients (as the commit shows them).
    static func events(for delivery: DeliveryEvent, recipients batch: CommittedChanges) -> [ControlEvent] {
        let status: DeliveryStatus
        var reason = ""
        switch delivery.kind {
        case .sent: status = .sent
        case .delivered: status = .delivered
        case .read: status = .read
        case .failed(let why):
            status = .failed
            reason = why
        }
        if let recipient = delivery.recipient {
            return [.delivery(message: delivery.message, recipient: recipient, status: status, reason: reason)]
        }
        let snapshot = batch.outbox.first { $0.entry.message == delivery.message }?.message
            ?? batch.changes.messages.first { $0.id == delivery.message }?.snapshot
        return (snapshot?.recipientStatus.keys.sorted() ?? []).map {
            .delivery(message: delivery.message, recipient: $0, status: status, reason: reason)
        }
    }
}
