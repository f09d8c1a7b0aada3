import NIOCore
import WeftCrypto
import WeftModel

/// A conversation as the control protocol shows it (SPEC.md §15.5, CONVERSATION).
public struct ConversationRecord: Hashable, Sendable {
    /// The canonical conversation: looking up one merged into it returns this one.
    public var id: ConversationID
    public var creator: UserID
    public var createdAt: HLCTimestamp
    public var isDistinct: Bool
    public var participants: [UserID]
    /// Conversations merged into this one.
    public var merged: [ConversationID]
    public var metadata: [String: String]
    public var messageCount: UInt32
    public var unreadCount: UInt32
    public var lastMessageAt: HLCTimestamp?
    /// Operations known to exist on a peer and not yet held here; nil while the node cannot
    /// tell (no replication report).
    public var unsyncedOperations: UInt64?

    public init(
        id: ConversationID, creator: UserID, createdAt: HLCTimestamp, isDistinct: Bool, participants: [UserID],
        merged: [ConversationID], metadata: [String: String], messageCount: UInt32, unreadCount: UInt32,
        lastMessageAt: HLCTimestamp?, unsyncedOperations: UInt64?
    ) {
        self.id = id
        self.creator = creator
        self.createdAt = createdAt
        self.isDistinct = isDistinct
        self.participants = participants
        self.merged = merged
        self.metadata = metadata
        self.messageCount = messageCount
        self.unreadCount = unreadCount
        self.lastMessageAt = lastMessageAt
        self.unsyncedOperations = unsyncedOperations
    }

    func write(into buffer: inout ByteBuffer) {
        buffer.writeBytes(id.bytes)
        buffer.writeBytes(creator.bytes)
        buffer.writeInteger(createdAt.rawValue)
        buffer.writeBool(isDistinct)
        buffer.writeList(participants.sorted()) { $0.writeBytes($1.bytes) }
        buffer.writeList(merged.sorted()) { $0.writeBytes($1.bytes) }
        buffer.writeList(metadata.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }) {
            $0.writeControlText($1.key)
            $0.writeControlText($1.value)
        }
        buffer.writeInteger(messageCount)
        buffer.writeInteger(unreadCount)
        buffer.writeInteger(lastMessageAt?.rawValue ?? 0)
        buffer.writeOptionalU64(unsyncedOperations)
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> ConversationRecord {
        let id = try buffer.readConversation("conversation")
        let creator = try buffer.readUser("creator")
        let createdAt = HLCTimestamp(rawValue: try buffer.readU64("creation time"))
        let isDistinct = try buffer.readBool("distinct")
        let participants = try buffer.readList("participants") { (b: inout ByteBuffer) throws(ControlFailure) in try b.readUser("participant") }
        let merged = try buffer.readList("merged conversations") { (b: inout ByteBuffer) throws(ControlFailure) in try b.readConversation("merged conversation") }
        let entries = try buffer.readList("metadata") { (b: inout ByteBuffer) throws(ControlFailure) in
            (try b.readControlText("metadata key"), try b.readControlText("metadata value"))
        }
        let messageCount = try buffer.readU32("message count")
        let unreadCount = try buffer.readU32("unread count")
        let last = try buffer.readU64("last message time")
        let unsynced = try buffer.readOptionalU64("unsynced operations")
        return ConversationRecord(
            id: id, creator: creator, createdAt: createdAt, isDistinct: isDistinct, participants: participants,
            merged: merged, metadata: Dictionary(entries, uniquingKeysWith: { _, last in last }),
            messageCount: messageCount, unreadCount: unreadCount,
            lastMessageAt: last == 0 ? nil : HLCTimestamp(rawValue: last), unsyncedOperations: unsynced)
    }
}

/// A recipient's status on the control socket (SPEC.md §15.5): the model's order, plus failed.
/// Compared in that order (invalid < pending < sent < delivered < read); *failed* is apart:
/// it is below every other status but invalid (a failed message reached no further than sent).
public enum DeliveryStatus: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible, Comparable {
    public static func < (lhs: DeliveryStatus, rhs: DeliveryStatus) -> Bool { lhs.rank < rhs.rank }

    private var rank: Int {
        switch self {
        case .invalid: 0
        case .failed: 1
        case .pending: 2
        case .sent: 3
        case .delivered: 4
        case .read: 5
        }
    }

    case invalid = 0, pending, sent, delivered, read, failed

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

    init(reading buffer: inout ByteBuffer, _ what: String) throws(ControlFailure) {
        let raw = try buffer.readU8(what)
        guard let status = DeliveryStatus(rawValue: raw) else { throw .malformed("\(what) \(raw) is not a status") }
        self = status
    }
}

/// A message as the control protocol shows it (SPEC.md §15.5, MESSAGES).
public struct MessageRecord: Hashable, Sendable {
    public struct Part: Hashable, Sendable {
        public var mimeType: String
        public var size: UInt64
        /// The data when `size` is at most `ControlConstants.maxInlinePartByteCount`, else empty.
        public var inlineData: [UInt8]
        /// For rich content (SPEC.md §17): where its transfer stands on this node.
        public var content: ContentState?

        public init(mimeType: String, size: UInt64, inlineData: [UInt8], content: ContentState? = nil) {
            self.mimeType = mimeType
            self.size = size
            self.inlineData = inlineData
            self.content = content
        }
    }

    /// A rich-content part's transfer on this node: the content's root, its status, how many
    /// of its bytes are verified here, and why, when paused or failed.
    public struct ContentState: Hashable, Sendable {
        public var root: [UInt8]
        public var status: ContentStatus
        public var verifiedBytes: UInt64
        public var reason: String

        public init(root: [UInt8], status: ContentStatus, verifiedBytes: UInt64, reason: String = "") {
            self.root = root
            self.status = status
            self.verifiedBytes = verifiedBytes
            self.reason = reason
        }
    }

    public struct Recipient: Hashable, Sendable {
        public var user: UserID
        public var status: DeliveryStatus
        /// Why, for `failed`; empty otherwise.
        public var reason: String

        public init(user: UserID, status: DeliveryStatus, reason: String = "") {
            self.user = user
            self.status = status
            self.reason = reason
        }
    }

    public var id: OperationID
    public var conversation: ConversationID
    public var sender: UserID
    public var sentAt: HLCTimestamp
    public var position: UInt32
    public var isSent: Bool
    public var isUnread: Bool
    public var parts: [Part]
    public var recipients: [Recipient]

    public init(
        id: OperationID, conversation: ConversationID, sender: UserID, sentAt: HLCTimestamp, position: UInt32,
        isSent: Bool, isUnread: Bool, parts: [Part], recipients: [Recipient]
    ) {
        self.id = id
        self.conversation = conversation
        self.sender = sender
        self.sentAt = sentAt
        self.position = position
        self.isSent = isSent
        self.isUnread = isUnread
        self.parts = parts
        self.recipients = recipients
    }

    static let sentFlag: UInt8 = 1
    static let unreadFlag: UInt8 = 2

    func write(into buffer: inout ByteBuffer) {
        buffer.writeBytes(id.bytes)
        buffer.writeBytes(conversation.bytes)
        buffer.writeBytes(sender.bytes)
        buffer.writeInteger(sentAt.rawValue)
        buffer.writeInteger(position)
        buffer.writeInteger((isSent ? Self.sentFlag : 0) | (isUnread ? Self.unreadFlag : 0))
        buffer.writeList(parts) {
            $0.writeControlText($1.mimeType)
            $0.writeInteger($1.size)
            $0.writeBlob($1.inlineData)
            $0.writeBool($1.content != nil)
            if let content = $1.content {
                $0.writeBytes(content.root)
                $0.writeInteger(content.status.rawValue)
                $0.writeInteger(content.verifiedBytes)
                $0.writeControlText(content.reason, limit: ControlConstants.maxErrorTextByteCount)
            }
        }
        buffer.writeList(recipients.sorted { $0.user < $1.user }) {
            $0.writeBytes($1.user.bytes)
            $0.writeInteger($1.status.rawValue)
            $0.writeControlText($1.reason, limit: ControlConstants.maxErrorTextByteCount)
        }
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> MessageRecord {
        let id = try buffer.readMessageID("message")
        let conversation = try buffer.readConversation("conversation")
        let sender = try buffer.readUser("sender")
        let sentAt = HLCTimestamp(rawValue: try buffer.readU64("sent time"))
        let position = try buffer.readU32("position")
        let flags = try buffer.readFlags("message flags", allowed: sentFlag | unreadFlag)
        let parts = try buffer.readList("parts") { (b: inout ByteBuffer) throws(ControlFailure) -> Part in
            let mimeType = try b.readControlText("MIME type")
            let size = try b.readU64("part size")
            let data = try b.readBlob("inline data", limit: ControlConstants.maxInlinePartByteCount)
            guard data.isEmpty || UInt64(data.count) == size else { throw .malformed("inline data of \(data.count) bytes for a part of \(size)") }
            guard try b.readBool("content present") else { return Part(mimeType: mimeType, size: size, inlineData: data) }
            guard data.isEmpty else { throw .malformed("a rich-content part with inline data") }
            guard let root = b.readBytes(length: 32) else { throw .malformed("a content root cut short") }
            let status = try ContentStatus(reading: &b)
            let verified = try b.readU64("verified bytes")
            guard verified <= size else { throw .malformed("\(verified) verified bytes of a part of \(size)") }
            let reason = try b.readControlText("content reason", limit: ControlConstants.maxErrorTextByteCount)
            return Part(mimeType: mimeType, size: size, inlineData: data,
                content: ContentState(root: root, status: status, verifiedBytes: verified, reason: reason))
        }
        let recipients = try buffer.readList("recipients") { (b: inout ByteBuffer) throws(ControlFailure) -> Recipient in
            Recipient(user: try b.readUser("recipient"), status: try DeliveryStatus(reading: &b, "status"),
                reason: try b.readControlText("reason", limit: ControlConstants.maxErrorTextByteCount))
        }
        return MessageRecord(
            id: id, conversation: conversation, sender: sender, sentAt: sentAt, position: position,
            isSent: flags & sentFlag != 0, isUnread: flags & unreadFlag != 0, parts: parts, recipients: recipients)
    }
}

extension ByteBuffer {
    /// present u8 || u64 if present.
    mutating func writeOptionalU64(_ value: UInt64?) {
        writeBool(value != nil)
        if let value { writeInteger(value) }
    }

    mutating func readOptionalU64(_ what: String) throws(ControlFailure) -> UInt64? {
        try readBool("\(what) present") ? try readU64(what) : nil
    }
}

/// Where a rich-content part's transfer stands on a node (SPEC.md §15.5), as the SDK names it:
/// the sender's content waits for a peer to fetch it, then goes up; a recipient's is ready,
/// then comes down, until complete; either may pause (with why) or fail.
public enum ContentStatus: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case awaitingUpload = 1, uploading, readyForDownload, downloading, complete, paused, failed

    init(reading buffer: inout ByteBuffer) throws(ControlFailure) {
        let raw = try buffer.readU8("content status")
        guard let status = ContentStatus(rawValue: raw) else { throw .malformed("content status \(raw) is not assigned") }
        self = status
    }

    public var description: String {
        switch self {
        case .awaitingUpload: "awaitingUpload"
        case .uploading: "uploading"
        case .readyForDownload: "readyForDownload"
        case .downloading: "downloading"
        case .complete: "complete"
        case .paused: "paused"
        case .failed: "failed"
        }
    }
}
