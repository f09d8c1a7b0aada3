import Foundation
import WeftModel
import WeftStore

/// Options for a new conversation (the SDK's distinct and metadata options).
public struct ConversationOptions: Sendable {
    /// One conversation per exact participant set; the default.
    public var distinct: Bool
    public var metadata: [String: String]
    /// Replicate the conversation at once (the SDK's "created through the platform API"). By
    /// default a conversation stays on this node until a message is sent in it, and then goes
    /// with everything written in it before.
    public var announce: Bool

    public init(distinct: Bool = true, metadata: [String: String] = [:], announce: Bool = false) {
        self.distinct = distinct
        self.metadata = metadata
        self.announce = announce
    }
}

/// A conversation as the client sees it.
public struct Conversation: Hashable, Sendable, Identifiable {
    public let id: ConversationID
    public var identifier: URL { WeftIdentifier.conversation(id).url }
    /// Conversations merged into this one; looking any of them up returns this one.
    public let mergedIdentifiers: [ConversationID]
    public let creator: UserID
    public let createdAt: HLCTimestamp
    public let participants: Set<UserID>
    public let isDistinct: Bool
    public let metadata: [String: String]
    public let totalMessageCount: Int
    public let unreadMessageCount: Int
    public let lastMessageAt: HLCTimestamp?

    init(_ snapshot: ConversationSnapshot) {
        id = snapshot.id
        mergedIdentifiers = snapshot.mergedIDs
        creator = snapshot.creator
        createdAt = snapshot.createdAt
        participants = Set(snapshot.participants)
        isDistinct = snapshot.isDistinct
        metadata = snapshot.metadata
        totalMessageCount = snapshot.messageCount
        unreadMessageCount = snapshot.unreadCount
        lastMessageAt = snapshot.lastMessageAt
    }
}

extension MessagePart {
    /// A `text/plain` part in UTF-8.
    public static func text(_ text: String) -> MessagePart {
        MessagePart(mimeType: "text/plain", data: Array(text.utf8))
    }

    /// A part whose MIME type is checked: anything but type/subtype throws.
    public static func validated(mimeType: String, data: [UInt8]) throws(WeftError) -> MessagePart {
        guard isValidMIMEType(mimeType) else { throw .invalidMIMEType(mimeType) }
        return MessagePart(mimeType: mimeType, data: data)
    }

    /// The part's data as UTF-8 text, if it is text.
    public var text: String? {
        mimeType.hasPrefix("text/") ? String(validating: data, as: UTF8.self) : nil
    }
}

/// A message as the client sees it.
public struct Message: Hashable, Sendable, Identifiable {
    public let id: OperationID
    public var identifier: URL { WeftIdentifier.message(id).url }
    public let conversation: ConversationID
    public let sender: UserID
    public let sentAt: HLCTimestamp
    public let parts: [MessagePart]
    public let options: MessageOptions
    public let position: Int
    /// Status per participant other than the sender (the SDK's recipientStatusByUserID).
    public let recipientStatus: [UserID: RecipientStatus]
    /// True once the mesh has the message: always for received ones; for the local user's own,
    /// once the outbox handed it to a peer.
    public let isSent: Bool
    /// Unread by the local user (never true for their own messages).
    public let isUnread: Bool
    /// Why each recipient whose status is `failed` failed; for one still `pending`, why the
    /// message waits, when the node knows (a rule withholds it from the only peers, §13.3).
    public let failureReasons: [UserID: String]

    /// The status for one user: `invalid` for the sender and for anyone not a participant.
    public func status(for user: UserID) -> RecipientStatus { recipientStatus[user] ?? .invalid }

    /// Why `user`'s status is `failed` ("expired: not delivered within 12 h", "rejected:
    /// REASON"), or `pending` when the node knows why it waits ("waiting: ..."); else nil.
    public func failureReason(for user: UserID) -> String? { failureReasons[user] }

    init(_ snapshot: MessageSnapshot, localUser: UserID, unsent: Bool) {
        id = snapshot.id
        conversation = snapshot.conversation
        sender = snapshot.sender
        sentAt = snapshot.sentAt
        parts = snapshot.parts
        options = snapshot.options
        position = snapshot.position
        isSent = !unsent
        // Until the mesh has it, the sender's recipients are pending, not sent.
        recipientStatus = snapshot.recipientStatus.mapValues { unsent && $0 == .sent ? .pending : $0 }
        isUnread = snapshot.sender != localUser && (snapshot.recipientStatus[localUser] ?? .read) < .read
        failureReasons = snapshot.failureReasons
    }
}

