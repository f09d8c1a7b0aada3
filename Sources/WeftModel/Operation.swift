import WeftCrypto

/// A message part: bytes and a MIME type of the form `type/subtype`.
public struct MessagePart: Hashable, Sendable {
    public var mimeType: String
    public var data: [UInt8]

    public init(mimeType: String, data: [UInt8]) {
        self.mimeType = mimeType
        self.data = data
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
        case .postMessage: 5
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
        var w = BinaryWriter()
        w.u8(Self.formatVersion)
        w.u8(body.kind)
        w.raw(author.bytes)
        w.raw(conversation.bytes)
        w.u64(sequence)
        w.u64(timestamp.rawValue)
        w.count(causes.count)
        for cause in causes { w.raw(cause.bytes) }
        var b = BinaryWriter()
        switch body {
        case .createConversation(let participants, let distinct, let generation, let metadata):
            b.u8(distinct ? 1 : 0)
            b.u32(generation)
            Self.writeUsers(participants, to: &b)
            b.count(metadata.count)
            for key in Self.sortedByUTF8(metadata.keys) {
                b.text(key)
                b.text(metadata[key]!)
            }
        case .addParticipants(let users), .removeParticipants(let users):
            Self.writeUsers(users, to: &b)
        case .setMetadata(let entries):
            b.count(entries.count)
            for key in Self.sortedByUTF8(entries.keys) {
                b.text(key)
                if let value = entries[key]! {
                    b.u8(1)
                    b.text(value)
                } else {
                    b.u8(0)
                }
            }
        case .postMessage(let parts, let options):
            b.count(parts.count)
            for part in parts {
                b.text(part.mimeType)
                b.blob(part.data)
            }
            Self.writeOptional(options.notificationText, to: &b)
            Self.writeOptional(options.notificationSound, to: &b)
        case .delivered(let messages), .read(let messages):
            let sorted = Array(Set(messages)).sorted()
            b.count(sorted.count)
            for message in sorted { b.raw(message.bytes) }
        case .markAllRead:
            break
        case .deleteMessage(let message):
            b.raw(message.bytes)
        }
        w.blob(b.bytes)
        return w.bytes
    }

    /// Decodes a canonical encoding. Non-canonical input (unsorted lists, duplicates, trailing
    /// bytes) is refused, so one operation has exactly one encoding and one identifier.
    public init(decoding bytes: [UInt8]) throws(OperationError) {
        guard bytes.count <= Self.maxByteCount else {
            throw .malformed("the operation is \(bytes.count) bytes; the limit is \(Self.maxByteCount)")
        }
        var r = BinaryReader(bytes)
        let version = try r.u8()
        guard version == Self.formatVersion else {
            throw OperationError(.unknownVersion, "operation format version \(version) is newer than this node's (1)")
        }
        let kind = try r.u8()
        // Keys are taken as bytes (SPEC.md §12.1): the author's is checked by the signature, and
        // a participant key that is no curve point names a user who can never sign.
        let author = PublicIdentity(unvalidatedBytes: try r.raw(PublicIdentity.byteCount))
        let conversation = ConversationID(bytes: try r.raw(ConversationID.byteCount))!
        let sequence = try r.u64()
        let timestamp = HLCTimestamp(rawValue: try r.u64())
        let causeCount = try r.count()
        var causes: [OperationID] = []
        for _ in 0..<causeCount { causes.append(OperationID(bytes: try r.raw(OperationID.byteCount))!) }
        guard Self.isStrictlySorted(causes) else { throw .malformed("causes are not sorted and unique") }
        let bodyBytes = try r.blob(limit: Self.maxByteCount)
        try r.expectEnd()

        var b = BinaryReader(bodyBytes)
        let body: OperationBody
        switch kind {
        case 1:
            let distinctByte = try b.u8()
            guard distinctByte <= 1 else { throw .malformed("distinct is not 0 or 1") }
            let generation = try b.u32()
            let participants = try Self.readUsers(&b)
            let metadataCount = try b.count()
            var metadata: [String: String] = [:]
            var lastKey: String?
            for _ in 0..<metadataCount {
                let key = try b.text()
                guard lastKey.map({ Array($0.utf8).lexicographicallyPrecedes(Array(key.utf8)) }) ?? true else {
                    throw .malformed("metadata keys are not sorted and unique")
                }
                lastKey = key
                guard metadata[key] == nil else { throw Self.equivalentKeys(key) }
                metadata[key] = try b.text()
            }
            body = .createConversation(participants: participants, distinct: distinctByte == 1, generation: generation, metadata: metadata)
        case 2: body = .addParticipants(try Self.readUsers(&b))
        case 3: body = .removeParticipants(try Self.readUsers(&b))
        case 4:
            let count = try b.count()
            guard count > 0 else { throw .malformed("setMetadata sets no keys") }
            var entries: [String: String?] = [:]
            var lastKey: String?
            for _ in 0..<count {
                let key = try b.text()
                guard lastKey.map({ Array($0.utf8).lexicographicallyPrecedes(Array(key.utf8)) }) ?? true else {
                    throw .malformed("metadata keys are not sorted and unique")
                }
                lastKey = key
                guard entries[key] == nil else { throw Self.equivalentKeys(key) }
                switch try b.u8() {
                case 0: entries[key] = .some(nil)
                case 1: entries[key] = .some(try b.text())
                default: throw .malformed("a metadata value flag is not 0 or 1")
                }
            }
            body = .setMetadata(entries)
        case 5:
            let count = try b.count()
            guard count > 0 else { throw .malformed("a message has no parts") }
            var parts: [MessagePart] = []
            for _ in 0..<count {
                let mimeType = try b.text()
                guard MessagePart.isValidMIMEType(mimeType) else {
                    throw .malformed("MIME type \"\(mimeType)\" is not of the form type/subtype")
                }
                parts.append(MessagePart(mimeType: mimeType, data: try b.blob(limit: Self.maxByteCount)))
            }
            let text = try Self.readOptional(&b)
            let sound = try Self.readOptional(&b)
            body = .postMessage(parts: parts, options: MessageOptions(notificationText: text, notificationSound: sound))
        case 6, 7:
            let count = try b.count()
            guard count > 0 else { throw .malformed("a receipt names no messages") }
            var messages: [OperationID] = []
            for _ in 0..<count { messages.append(OperationID(bytes: try b.raw(OperationID.byteCount))!) }
            guard Self.isStrictlySorted(messages) else { throw .malformed("receipt messages are not sorted and unique") }
            body = kind == 6 ? .delivered(messages) : .read(messages)
        case 8: body = .markAllRead
        case 9: body = .deleteMessage(OperationID(bytes: try b.raw(OperationID.byteCount))!)
        default:
            throw OperationError(.unknownKind, "operation kind \(kind) is unknown to this version (from a newer one?)")
        }
        try b.expectEnd()
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

    /// Metadata keys in the order of their UTF-8 bytes (§12.3), which is not `String`'s order
    /// for text that is not in normalization form C.
    private static func sortedByUTF8(_ keys: some Sequence<String>) -> [String] {
        keys.map { (key: $0, bytes: Array($0.utf8)) }
            .sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
            .map(\.key)
    }

    private static func equivalentKeys(_ key: String) -> OperationError {
        .malformed("two metadata keys are canonically equivalent text (\"\(key)\")")
    }

    private static func writeUsers(_ users: [UserID], to w: inout BinaryWriter) {
        let sorted = Array(Set(users)).sorted()
        w.count(sorted.count)
        for user in sorted { w.raw(user.bytes) }
    }

    private static func readUsers(_ r: inout BinaryReader) throws(OperationError) -> [UserID] {
        let count = try r.count()
        guard count > 0, count <= maxItems else { throw .malformed("a participant list holds \(count) users") }
        var users: [UserID] = []
        for _ in 0..<count {
            users.append(PublicIdentity(unvalidatedBytes: try r.raw(PublicIdentity.byteCount)))
        }
        guard isStrictlySorted(users) else { throw .malformed("participants are not sorted and unique") }
        return users
    }

    private static func writeOptional(_ text: String?, to w: inout BinaryWriter) {
        if let text {
            w.u8(1)
            w.text(text)
        } else {
            w.u8(0)
        }
    }

    private static func readOptional(_ r: inout BinaryReader) throws(OperationError) -> String? {
        switch try r.u8() {
        case 0: return nil
        case 1: return try r.text()
        default: throw .malformed("an optional field's flag is not 0 or 1")
        }
    }

    private static func isStrictlySorted<T: Comparable>(_ items: [T]) -> Bool {
        zip(items, items.dropFirst()).allSatisfy { $0 < $1 }
    }
}
