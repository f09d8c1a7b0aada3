import NIOCore
import WeftBytes
import WeftCrypto
import WeftModel
import WeftWire

// The bodies of SPEC.md §14.3–§14.8, §14.12 and §17.8, byte by byte. One switch writes, one reads, in the same
// order of types. Integers are big-endian; lists are a u16 count then their items.

extension SyncMessage {
    /// Most items one list of a body may hold (its u16 count).
    public static let maxListCount = Int(UInt16.max)
    /// Bytes of one SUMMARY entry: conversation, digest, last activity.
    public static let summaryEntryByteCount = ConversationID.byteCount + SetDigest.byteCount + 8
    /// Bytes of one IHAVE entry: conversation, author, sequence, identifier.
    public static let announcementByteCount = ConversationID.byteCount + PublicIdentity.byteCount + 8 + OperationID.byteCount
    /// Bytes of one (author, sequence) pair of a WANT's heads.
    public static let headByteCount = PublicIdentity.byteCount + 8
    /// Bytes of one STORED entry: conversation, author, first and last sequence.
    public static let slotRangeByteCount = ConversationID.byteCount + PublicIdentity.byteCount + 8 + 8
    /// Most entries one NAMES message holds (§14.12): a peer's whole list goes in several.
    public static let maxNamesCount = 256
    /// Bytes of the shortest NAMES entry: a user and an empty name's length byte.
    public static let nameEntryMinimumByteCount = PublicIdentity.byteCount + 1

    /// Most items a list of a `type` message may hold.
    static func maxListCount(of type: SyncMessageType) -> Int {
        type == .names ? maxNamesCount : maxListCount
    }

    // MARK: - Writing

    /// The DATA payload: type byte and body (§14.1).
    ///
    /// - Throws: `SyncMessageError.listTooLong` for a list over `maxListCount` items, and
    ///   `.tooLarge` for a body over `SyncEnvelope.maxBodyByteCount` bytes. The core splits
    ///   its messages to fit, but what it is asked to send grows with what peers send it, so
    ///   a message that does not fit is refused here, before a byte is written, not trapped on.
    public func encode() throws(SyncMessageError) -> [UInt8] { try payload().readableBytesArray }

    /// The DATA payload as a buffer (see `encode()`).
    public func payload() throws(SyncMessageError) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: try checkFits())
        buffer.writeInteger(type.rawValue)
        switch self {
        case .have(let have):
            have.encodeBody(into: &buffer)
        case .summary(let summary):
            buffer.writeInteger(summary.isFinal ? UInt8(1) : 0)
            buffer.writeListCount(summary.entries.count)
            for entry in summary.entries {
                buffer.writeBytes(entry.conversation.bytes)
                buffer.writeBytes(entry.digest.bytes)
                buffer.writeInteger(entry.lastActivity.rawValue)
            }
        case .want(let want):
            buffer.writeInteger(want.isGraft ? UInt8(1) : 0)
            buffer.writeListCount(want.entries.count)
            for entry in want.entries {
                buffer.writeBytes(entry.conversation.bytes)
                if let beyond = entry.beyond {
                    buffer.writeInteger(UInt8(1))
                    let heads = beyond.entries.sorted { $0.key < $1.key }
                    buffer.writeListCount(heads.count)
                    for (author, sequence) in heads {
                        buffer.writeBytes(author.bytes)
                        buffer.writeInteger(sequence)
                    }
                } else {
                    buffer.writeInteger(UInt8(0))
                }
                buffer.writeListCount(entry.ids.count)
                for id in entry.ids { buffer.writeBytes(id.bytes) }
            }
        case .operations(let operations):
            buffer.writeInteger(operations.isPush ? UInt8(1) : 0)
            buffer.writeListCount(operations.operations.count)
            for operation in operations.operations {
                buffer.writeInteger(UInt32(operation.encoding.count))
                buffer.writeBytes(operation.encoding)
                buffer.writeBytes(operation.signature)
            }
        case .stored(let ranges):
            buffer.writeListCount(ranges.count)
            for range in ranges {
                buffer.writeBytes(range.conversation.bytes)
                buffer.writeBytes(range.author.bytes)
                buffer.writeInteger(range.sequences.lowerBound)
                buffer.writeInteger(range.sequences.upperBound)
            }
        case .ihave(let announcements):
            buffer.writeListCount(announcements.count)
            for announcement in announcements {
                buffer.writeBytes(announcement.conversation.bytes)
                buffer.writeBytes(announcement.author.bytes)
                buffer.writeInteger(announcement.sequence)
                buffer.writeBytes(announcement.id.bytes)
            }
        case .prune:
            break
        case .names(let names):
            buffer.writeListCount(names.count)
            for name in names {
                buffer.writeBytes(name.user.bytes)
                // `UserName` keeps its name within 64 bytes, so it fits the u8 length.
                buffer.writeLengthPrefixedText(name.displayName, UInt8.self)
            }
        case .content(let message):
            message.writeBody(to: &buffer)
        }
        return buffer
    }

    /// Checks every list count and the body's length against the limits of §14.1 and
    /// §14.3–§14.8; returns the payload's length.
    func checkFits() throws(SyncMessageError) -> Int {
        func check(_ count: Int) throws(SyncMessageError) {
            guard count <= Self.maxListCount(of: type) else { throw .listTooLong(type, count) }
        }
        switch self {
        case .have, .prune: break  // HaveMessage checks its own counts when made
        case .summary(let summary): try check(summary.entries.count)
        case .want(let want):
            try check(want.entries.count)
            for entry in want.entries {
                try check(entry.beyond?.entries.count ?? 0)
                try check(entry.ids.count)
            }
        case .operations(let operations): try check(operations.operations.count)
        case .stored(let ranges): try check(ranges.count)
        case .ihave(let announcements): try check(announcements.count)
        case .names(let names): try check(names.count)
        case .content(let message): try message.checkFits()
        }
        let payloadByteCount = encodedByteCount
        guard payloadByteCount - 1 <= SyncEnvelope.maxBodyByteCount else { throw .tooLarge(payloadByteCount - 1) }
        return payloadByteCount
    }

    /// The payload's length, computed without encoding: what flow control counts.
    public var encodedByteCount: Int {
        1 + {
            switch self {
            case .have(let have): have.bodyByteCount
            case .summary(let summary): 3 + summary.entries.count * Self.summaryEntryByteCount
            case .want(let want): 3 + want.entries.reduce(0) { $0 + Self.byteCount(of: $1) }
            case .operations(let operations): 3 + operations.operations.reduce(0) { $0 + Self.byteCount(of: $1) }
            case .stored(let ranges): 2 + ranges.count * Self.slotRangeByteCount
            case .ihave(let announcements): 2 + announcements.count * Self.announcementByteCount
            case .prune: 0
            case .names(let names): 2 + names.reduce(0) { $0 + Self.byteCount(of: $1) }
            case .content(let message): message.bodyByteCount
            }
        }()
    }

    /// Bytes one operation takes in an OPERATIONS body (its §12.1 wire form).
    public static func byteCount(of operation: SignedOperation) -> Int {
        4 + operation.encoding.count + SignedOperation.signatureByteCount
    }

    /// Bytes one entry takes in a NAMES body.
    public static func byteCount(of name: UserName) -> Int {
        nameEntryMinimumByteCount + name.displayName.utf8.count
    }

    /// Bytes one entry takes in a WANT body.
    public static func byteCount(of entry: Want.Entry) -> Int {
        ConversationID.byteCount + 1 + (entry.beyond.map { 2 + $0.entries.count * headByteCount } ?? 0)
            + 2 + entry.ids.count * OperationID.byteCount
    }

    // MARK: - Reading

    /// Reads one whole DATA payload (§14.1, then the body as its type says).
    public init(payload: ByteBuffer) throws(SyncMessageError) {
        try self.init(SyncEnvelope.read(from: payload))
    }

    /// Reads one whole DATA payload given as bytes.
    public init(payload: [UInt8]) throws(SyncMessageError) {
        try self.init(payload: ByteBuffer(bytes: payload))
    }

    /// Reads the body of an envelope.
    public init(_ envelope: SyncEnvelope) throws(SyncMessageError) {
        var reader = BodyReader(type: envelope.type, buffer: envelope.body)
        switch envelope.type {
        case .have:
            self = .have(try HaveMessage(body: envelope.body))
            return
        case .summary:
            let isFinal = try reader.flag()
            let count = try reader.count(itemByteCount: Self.summaryEntryByteCount)
            var entries: [Summary.Entry] = []
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let entry = Summary.Entry(
                    conversation: try reader.conversation(), digest: try reader.digest(),
                    lastActivity: HLCTimestamp(rawValue: try reader.integer(UInt64.self)))
                if let last = entries.last, !(last.conversation < entry.conversation) {
                    throw .invalidBody(.summary, "conversations not strictly ascending")
                }
                entries.append(entry)
            }
            self = .summary(Summary(isFinal: isFinal, entries: entries))
        case .want:
            let isGraft = try reader.flag()
            let count = try reader.count(itemByteCount: ConversationID.byteCount + 3)
            var entries: [Want.Entry] = []
            entries.reserveCapacity(count)
            var seen = Set<ConversationID>(minimumCapacity: count)
            for _ in 0..<count {
                let conversation = try reader.conversation()
                guard seen.insert(conversation).inserted else {
                    throw .invalidBody(.want, "conversation \(conversation) asked for twice")
                }
                var beyond: VersionVector?
                if try reader.flag() {
                    var heads = VersionVector()
                    var previous: UserID?
                    for _ in 0..<(try reader.count(itemByteCount: Self.headByteCount)) {
                        let author = try reader.user()
                        let sequence = try reader.integer(UInt64.self)
                        if let previous, !(previous < author) { throw .invalidBody(.want, "heads not strictly ascending by author") }
                        guard sequence > 0 else { throw .invalidBody(.want, "a head with sequence 0") }
                        heads.set(author, sequence)
                        previous = author
                    }
                    beyond = heads
                }
                let ids = try reader.ids()
                guard beyond != nil || !ids.isEmpty else {
                    throw .invalidBody(.want, "an entry for \(conversation) asks for nothing")
                }
                entries.append(Want.Entry(conversation: conversation, beyond: beyond, ids: ids))
            }
            self = .want(Want(isGraft: isGraft, entries: entries))
        case .operations:
            let isPush = try reader.flag()
            let count = try reader.count(itemByteCount: 4 + SignedOperation.signatureByteCount)
            guard count > 0 else { throw .invalidBody(.operations, "no operations") }
            var operations: [SignedOperation] = []
            operations.reserveCapacity(count)
            for index in 0..<count { operations.append(try reader.operation(index: index)) }
            self = .operations(Operations(isPush: isPush, operations: operations))
        case .stored:
            let count = try reader.count(itemByteCount: Self.slotRangeByteCount)
            guard count > 0 else { throw .invalidBody(.stored, "no operations") }
            var ranges: [SlotRange] = []
            ranges.reserveCapacity(count)
            for _ in 0..<count {
                let conversation = try reader.conversation()
                let author = try reader.user()
                let first = try reader.integer(UInt64.self)
                let last = try reader.integer(UInt64.self)
                guard first <= last else { throw .invalidBody(.stored, "a range from sequence \(first) down to \(last)") }
                ranges.append(SlotRange(conversation: conversation, author: author, sequences: first...last))
            }
            self = .stored(ranges)
        case .ihave:
            let count = try reader.count(itemByteCount: Self.announcementByteCount)
            guard count > 0 else { throw .invalidBody(.ihave, "no announcements") }
            var announcements: [Announcement] = []
            announcements.reserveCapacity(count)
            for _ in 0..<count {
                let announcement = Announcement(
                    conversation: try reader.conversation(), author: try reader.user(),
                    sequence: try reader.integer(UInt64.self), id: try reader.id())
                guard announcement.sequence > 0 else { throw .invalidBody(.ihave, "an announcement with sequence 0") }
                announcements.append(announcement)
            }
            self = .ihave(announcements)
        case .prune:
            self = .prune
        case .names:
            // The bound first, whatever follows: a longer list is malformed, not short.
            let count = Int(try reader.integer(UInt16.self))
            guard count <= Self.maxNamesCount else {
                throw .invalidBody(.names, "\(count) entries (at most \(Self.maxNamesCount))")
            }
            guard count > 0 else { throw .invalidBody(.names, "no entries") }
            guard count * Self.nameEntryMinimumByteCount <= reader.buffer.readableBytes else { throw .truncated(.names) }
            var names: [UserName] = []
            names.reserveCapacity(count)
            for _ in 0..<count {
                names.append(UserName(user: try reader.user(), displayName: try reader.displayName()))
            }
            self = .names(names)
        case .holdingsRequest, .holdings, .manifestRequest, .manifest, .chunkRequest, .chunk, .notHeld, .cancel:
            // The content-transfer reader checks the whole body, its end included.
            self = .content(try ContentTransferMessage(type: envelope.type, body: envelope.body))
            return
        case .compressed:
            // Only the connection's stream can decode it (§14.11): one here was not passed
            // through a `SyncStreamDecoder`, or was nested in another COMPRESSED message.
            throw .invalidBody(.compressed, "a COMPRESSED message must hold a message of another type")
        }
        try reader.expectEnd()
    }
}

// MARK: - Primitives

extension ByteBuffer {
    /// Writes a list's u16 count. `SyncMessage.checkFits()` ran first: a larger count cannot
    /// reach here, and would be written clamped (and refused by the reader) rather than trap.
    fileprivate mutating func writeListCount(_ count: Int) {
        writeInteger(UInt16(clamping: count))
    }
}

/// Reads a body's fields, turning every shortfall into `.truncated` and every bad value into
/// the message type's error.
private struct BodyReader {
    let type: SyncMessageType
    var buffer: ByteBuffer

    mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(SyncMessageError) -> T {
        guard let value = buffer.readInteger(as: T.self) else { throw .truncated(type) }
        return value
    }

    mutating func bytes(_ count: Int) throws(SyncMessageError) -> [UInt8] {
        guard let bytes = buffer.readBytes(length: count) else { throw .truncated(type) }
        return bytes
    }

    /// A flags byte with only bit 0 defined.
    mutating func flag() throws(SyncMessageError) -> Bool {
        switch try integer(UInt8.self) {
        case 0: return false
        case 1: return true
        case let other: throw .invalidBody(type, "flags 0x\(String(other, radix: 16)) (only 0 and 1 are defined)")
        }
    }

    /// A list count, checked against the bytes left: `count` items of at least
    /// `itemByteCount` bytes each must fit before anything is allocated for them.
    mutating func count(itemByteCount: Int) throws(SyncMessageError) -> Int {
        let count = Int(try integer(UInt16.self))
        guard count * itemByteCount <= buffer.readableBytes else { throw .truncated(type) }
        return count
    }

    mutating func conversation() throws(SyncMessageError) -> ConversationID {
        guard let id = ConversationID(bytes: try bytes(ConversationID.byteCount)) else { throw .truncated(type) }
        return id
    }

    mutating func id() throws(SyncMessageError) -> OperationID {
        guard let id = OperationID(bytes: try bytes(OperationID.byteCount)) else { throw .truncated(type) }
        return id
    }

    /// An author key, taken as it is (a signature check refuses a key that is no point).
    mutating func user() throws(SyncMessageError) -> UserID {
        PublicIdentity(unvalidatedBytes: try bytes(PublicIdentity.byteCount))
    }

    /// A display name as node info carries it (§3.3): u8 length, at most 64 bytes of UTF-8.
    mutating func displayName() throws(SyncMessageError) -> String {
        let name: String?
        do {
            name = try buffer.readLengthPrefixedText(UInt8.self, limit: WireConstants.maxDisplayNameByteCount)
        } catch {
            throw .invalidBody(type, "a display name: \(error)")
        }
        guard let name else { throw .truncated(type) }
        return name
    }

    mutating func digest() throws(SyncMessageError) -> SetDigest {
        guard let digest = SetDigest(bytes: try bytes(SetDigest.byteCount)) else { throw .truncated(type) }
        return digest
    }

    /// A list of identifiers, strictly ascending.
    mutating func ids() throws(SyncMessageError) -> [OperationID] {
        let count = try count(itemByteCount: OperationID.byteCount)
        var ids: [OperationID] = []
        ids.reserveCapacity(count)
        for _ in 0..<count {
            let id = try id()
            if let last = ids.last, !(last < id) { throw .invalidBody(type, "identifiers not strictly ascending") }
            ids.append(id)
        }
        return ids
    }

    /// One §12.1 wire form: `u32 length || encoding || signature (64)`.
    mutating func operation(index: Int) throws(SyncMessageError) -> SignedOperation {
        let length = Int(try integer(UInt32.self))
        guard length <= Operation.maxByteCount else {
            throw .invalidOperation(index: index, "an encoding of \(length) bytes is over the limit of \(Operation.maxByteCount)")
        }
        guard buffer.readableBytes >= length + SignedOperation.signatureByteCount else { throw .truncated(type) }
        buffer.moveReaderIndex(to: buffer.readerIndex - 4)
        let wire = try bytes(4 + length + SignedOperation.signatureByteCount)
        do {
            return try SignedOperation(wireBytes: wire)
        } catch {
            throw .invalidOperation(index: index, error.description)
        }
    }

    func expectEnd() throws(SyncMessageError) {
        guard buffer.readableBytes == 0 else { throw .trailingBytes(type, buffer.readableBytes) }
    }
}
