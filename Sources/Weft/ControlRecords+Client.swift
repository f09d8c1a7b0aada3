import WeftControl
import WeftModel

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
    init(_ message: Message) {
        self.init(
            id: message.id, conversation: message.conversation, sender: message.sender, sentAt: message.sentAt,
            position: UInt32(clamping: message.position), isSent: message.isSent, isUnread: message.isUnread,
            parts: message.parts.map { part in
                Part(
                    mimeType: part.mimeType, size: UInt32(clamping: part.data.count),
                    inlineData: part.data.count <= ControlConstants.maxInlinePartByteCount ? part.data : [])
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
            }
        self.init(code, error.description)
    }
}

extension ControlEvent {
    /// The events one client change makes: the change itself, and the delivery events it
    /// implies for a message (each recipient whose status rose to delivered or read; every
    /// recipient, as sent, when the message leaves the outbox).
    static func events(for change: ObjectChange) -> [ControlEvent] {
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
            var events: [ControlEvent] = [.message(kind, message.id, conversation: message.conversation, property: property)]
            switch (change.property, change.oldValue, change.newValue) {
            case (.recipientStatus, .statuses(let old), .statuses(let new)):
                for (user, status) in new.sorted(by: { $0.key < $1.key })
                where status >= .delivered && status > (old[user] ?? .invalid) {
                    events.append(.delivery(message: message.id, recipient: user, status: DeliveryStatus(status), reason: ""))
                }
            case (.isSent, .bool(false), .bool(true)):
                for user in message.recipientStatus.keys.sorted() {
                    events.append(.delivery(message: message.id, recipient: user, status: .sent, reason: ""))
                }
            default:
                break
            }
            return events
        }
    }
}
