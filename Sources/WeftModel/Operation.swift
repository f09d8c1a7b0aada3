import NIOCore
import WeftBytes
import WeftCrypto

/// A message part: a MIME type of the form `type/subtype`, and either its bytes inline or, for
/// rich content (SPEC.md §17), the descriptor of content that travels apart from the message,
/// in chunks.
public struct MessagePart: Hashable, Sendable {
    public var mimeType: String
    /// The part's bytes when inline; empty for rich content.
    public var data: [UInt8]
    /// The content's descriptor (size, chunk size, hash-tree root) for rich content.
    public var content: ContentDescriptor?
    /// Set by a store query for an inline part larger than it loads with a page of messages:
    /// the part's size, its bytes left in the operation log (`data` is then empty; read them
    /// on demand). Nil for a part as it travels.
    public var unloadedByteCount: Int?

    public init(mimeType: String, data: [UInt8]) {
        self.mimeType = mimeType
        self.data = data
        self.content = nil
    }

    /// A rich-content part: its bytes are the content `descriptor` describes.
    public init(mimeType: String, content descriptor: ContentDescriptor) {
        self.mimeType = mimeType
        self.data = []
        self.content = descriptor
    }

    /// The part's size in bytes: inline data's (loaded or not), or the content's.
    public var byteCount: UInt64 { content?.byteCount ?? UInt64(unloadedByteCount ?? data.count) }

    /// The part as a page of messages carries it: an inline part of more than `byteCount`
    /// bytes without its bytes (`unloadedByteCount` says its size); others as they are.
    public func loaded(upTo byteCount: Int) -> MessagePart {
        guard content == nil, unloadedByteCount == nil, data.count > byteCount else { return self }
        return MessagePart(mimeType: mimeType, unloadedByteCount: data.count)
    }

    /// An inline part of `byteCount` bytes whose data was not loaded.
    public init(mimeType: String, unloadedByteCount byteCount: Int) {
        self.mimeType = mimeType
        self.data = []
        self.content = nil
        self.unloadedByteCount = byteCount
    }

    /// Whether `mimeType` has the form `type/subtype`: two non-empty tokens of RFC 2045 token
    /// characters around one slash (parameters after `;` are allowed).
    public static func isValidMIMEType(_ mimeType: String) -> Bool {
        var slash: Int?
        var length = 0
        for byte in mimeType.utf8 {
            if byte == UInt8(ascii: ";") { break }
            if byte == UInt8(ascii: "/") {
                guard slash == nil else { return false }
                slash = length
            } else if !isTokenByte(byte) {
                return false
            }
            length += 1
        }
        guard let slash else { return false }
        return slash > 0 && slash < length - 1
    }

    /// RFC 2045 token characters: printable ASCII but space and tspecials.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        guard byte > 32, byte < 127 else { return false }
        switch byte {
        case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "@"), UInt8(ascii: ","),
            UInt8(ascii: ";"), UInt8(ascii: ":"), UInt8(ascii: "\\"), UInt8(ascii: "\""), UInt8(ascii: "/"), UInt8(ascii: "["),
            UInt8(ascii: "]"), UInt8(ascii: "?"), UInt8(ascii: "="):
            return false
        default:
            return true
        }
    }
}

/// Options carried with a message (the SDK's push notification text and sound).
public struct MessageOptions: Hashable, Sendable {
    public var notificationText: String?
    public var notificationSound: String?

    public init(notificationText: String? = nil, notificationSound: String? = nil) {
        self.notificationText = notificationText
        self.notificationSound = notificationSound
    }
}

/// What an operation does (SPEC.md §12.3). Each case's payload is its body.
public enum OperationBody: Hashable, Sendable {
    /// Creates the conversation named by the operation. `participants` include the creator.
    /// Distinct conversations created for the same participant set in the same `generation`
    /// merge (§13.2).
    case createConversation(participants: [UserID], distinct: Bool, generation: UInt32, metadata: [String: String])
    case addParticipants([UserID])
    case removeParticipants([UserID])
    /// Sets (or, with nil, removes) metadata keys.
    case setMetadata([String: String?])
    case postMessage(parts: [MessagePart], options: MessageOptions)
    /// The author's node has these messages.
    case delivered([OperationID])
    /// The author has read these messages.
    case read([OperationID])
    /// The author has read every message in this operation's causal past: a watermark.
    case markAllRead
    /// Deletes a message for everyone; only its sender may.
    case deleteMessage(OperationID)

    /// The body with its lists as the encoding has them: sorted, without repeats. A body built
    /// in memory then equals the one its bytes decode to, so its author's replica keys merge
    /// groups and receipts exactly as its peers do.
    var canonical: OperationBody {
        func sorted<T: Comparable & Hashable>(_ items: [T]) -> [T] {
            zip(items, items.dropFirst()).allSatisfy { $0 < $1 } ? items : Array(Set(items)).sorted()
        }
        switch self {
        case .createConversation(let participants, let distinct, let generation, let metadata):
            return .createConversation(participants: sorted(participants), distinct: distinct, generation: generation, metadata: metadata)
        case .addParticipants(let users): return .addParticipants(sorted(users))
        case .removeParticipants(let users): return .removeParticipants(sorted(users))
        case .delivered(let messages): return .delivered(sorted(messages))
        case .read(let messages): return .read(sorted(messages))
        case .setMetadata, .postMessage, .markAllRead, .deleteMessage: return self
        }
    }

    /// Kind numbers on the wire.
    public var kind: UInt8 {
        switch self {
        case .createConversation: 1
        case .addParticipants: 2
        case .removeParticipants: 3
        case .setMetadata: 4
        // A message with rich content is kind 10, so that readers of kind 5 stay as they were.
        case .postMessage(let parts, _): parts.contains { $0.content != nil } ? 10 : 5
        case .delivered: 6
        case .read: 7
        case .markAllRead: 8
        case .deleteMessage: 9
        }
    }
}

/// An immutable change to a conversation (SPEC.md §12): who, where, when, after what, and what.
public struct Operation: Hashable, Sendable {
    public static let formatVersion: UInt8 = 1
    /// Largest canonical encoding: an operation must fit in one DATA frame with room to spare.
    public static let maxByteCount = 512 * 1024
    /// Most users a participant list may hold (SPEC.md §12.3).
    public static let maxItems = 4096
    /// Most causes a node names in an operation it writes (`Replica.causes(forNextOf:in:)`):
    /// the room `OperationBody.limitViolation` leaves for them.
    public static let maxWrittenCauses = 64

    public var author: UserID
    public var conversation: ConversationID
    /// The author's sequence number within this conversation, from 1.
    public var sequence: UInt64
    public var timestamp: HLCTimestamp
    /// The conversation heads the author had seen: sorted, without duplicates.
    public var causes: [OperationID]
    public var body: OperationBody

    public init(
        author: UserID, conversation: ConversationID, sequence: UInt64, timestamp: HLCTimestamp,
        causes: [OperationID], body: OperationBody
    ) {
        self.author = author
        self.conversation = conversation
        self.sequence = sequence
        self.timestamp = timestamp
        self.causes = Array(Set(causes)).sorted()
        self.body = body.canonical
    }

    // MARK: - Canonical encoding

    /// The canonical encoding: the bytes that are hashed and signed.
    public func encoded() -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: estimatedByteCount)
        write(to: &buffer)
        return buffer.readableBytesArray
    }

    /// Writes the canonical encoding (SPEC.md §12.1) and returns its length.
    @discardableResult
    func write(to w: inout ByteBuffer) -> Int {
        var written = w.writeInteger(Self.formatVersion) + w.writeInteger(body.kind)
        written += w.writeBytes(author.bytes) + w.writeBytes(conversation.bytes)
        written += w.writeInteger(sequence) + w.writeInteger(timestamp.rawValue)
        written += w.writeOperationListCount(causes.count)
        for cause in causes { written += w.writeBytes(cause.bytes) }
        written += w.writeLengthPrefixed(UInt32.self) { b in body.write(to: &b) }
        return written
    }

    /// Enough capacity for the encoding in one allocation (exact but for small text fields).
    private var estimatedByteCount: Int {
        let header = 2 + PublicIdentity.byteCount + ConversationID.byteCount + 16 + 2 + causes.count * OperationID.byteCount + 4
        switch body {
        case .postMessage(let parts, _):
            return header + parts.reduce(64) { $0 + 6 + $1.mimeType.utf8.count + $1.data.count }
        case .createConversation(let users, _, _, _), .addParticipants(let users), .removeParticipants(let users):
            return header + 128 + users.count * PublicIdentity.byteCount
        case .delivered(let ids), .read(let ids):
            return header + 2 + ids.count * OperationID.byteCount
        case .setMetadata, .markAllRead, .deleteMessage:
            return header + 128
        }
    }

    /// Decodes a canonical encoding. Non-canonical input (unsorted lists, duplicates, trailing
    /// bytes) is refused, so one operation has exactly one encoding and one identifier.
    public init(decoding bytes: [UInt8]) throws(OperationError) {
        try self.init(decoding: ByteBuffer(bytes: bytes))
    }

    /// Decodes a canonical encoding: every readable byte of `buffer` belongs to it.
    init(decoding buffer: ByteBuffer) throws(OperationError) {
        guard buffer.readableBytes <= Self.maxByteCount else {
            throw .malformed("the operation is \(buffer.readableBytes) bytes; the limit is \(Self.maxByteCount)")
        }
        var r = buffer
        let version = try r.readOperationInteger(UInt8.self)
        guard version == Self.formatVersion else {
            throw OperationError(.unknownVersion, "operation format version \(version) is newer than this node's (1)")
        }
        let kind = try r.readOperationInteger(UInt8.self)
        let author = try r.readOperationUser()
        guard let conversation = ConversationID(bytes: try r.readOperationBytes(count: ConversationID.byteCount)) else {
            throw .endsEarly
        }
        let sequence = try r.readOperationInteger(UInt64.self)
        let timestamp = HLCTimestamp(rawValue: try r.readOperationInteger(UInt64.self))
        let causeCount = try r.readOperationListCount()
        var causes: [OperationID] = []
        causes.reserveCapacity(causeCount)
        for _ in 0..<causeCount { causes.append(try r.readOperationID()) }
        guard Self.isStrictlySorted(causes) else { throw .malformed("causes are not sorted and unique") }
        var b = try r.readOperationBlob(limit: Self.maxByteCount)
        try r.expectOperationEnd("the operation")

        let body = try OperationBody(kind: kind, reading: &b)
        try b.expectOperationEnd("the operation's body")
        self.init(author: author, conversation: conversation, sequence: sequence, timestamp: timestamp, causes: causes, body: body)
    }

    // MARK: - Structure

    /// The rules of SPEC.md §12 that the decoder enforces and a value built in memory can still
    /// break (an empty list, a bad MIME type, too many participants, too large an encoding).
    /// A replica refuses such an operation as malformed, as every other node would refuse its
    /// bytes: no node may accept an operation the others cannot read.
    func structuralError(encodedByteCount: Int) -> OperationError? {
        guard encodedByteCount <= Self.maxByteCount else {
            return .malformed("the operation is \(encodedByteCount) bytes; the limit is \(Self.maxByteCount)")
        }
        switch body {
        case .createConversation(let users, _, _, _), .addParticipants(let users), .removeParticipants(let users):
            let count = Set(users).count
            guard count > 0, count <= Self.maxItems else { return .malformed("a participant list holds \(count) users") }
        case .setMetadata(let entries):
            guard !entries.isEmpty else { return .malformed("setMetadata sets no keys") }
        case .postMessage(let parts, _):
            guard !parts.isEmpty else { return .malformed("a message has no parts") }
            for part in parts where !MessagePart.isValidMIMEType(part.mimeType) {
                return .malformed("MIME type \"\(part.mimeType)\" is not of the form type/subtype")
            }
        case .delivered(let ids), .read(let ids):
            guard !ids.isEmpty else { return .malformed("a receipt names no messages") }
        case .markAllRead, .deleteMessage:
            break
        }
        return nil
    }

    // MARK: - Helpers

    /// Metadata entries in the order of their keys' UTF-8 bytes (§12.3), which is not
    /// `String`'s order for text that is not in normalization form C.
    static func sortedByUTF8<Value>(_ entries: [String: Value]) -> [(key: String, value: Value)] {
        entries.map { (entry: $0, bytes: Array($0.key.utf8)) }
            .sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
            .map(\.entry)
    }

    static func equivalentKeys(_ key: String) -> OperationError {
        .malformed("two metadata keys are canonically equivalent text (\"\(key)\")")
    }

    static func isStrictlySorted<T: Comparable>(_ items: [T]) -> Bool {
        zip(items, items.dropFirst()).allSatisfy { $0 < $1 }
    }
}
