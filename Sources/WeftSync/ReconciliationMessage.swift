import NIOCore
import WeftModel

/// The body of a HAVE sync message (type 0x01, SPEC.md §14.3): one round of range-based set
/// reconciliation. Its ranges follow each other in ascending order from the start of the
/// conversation identifier space; whatever lies past the last one is settled (a skip).
///
/// Every value is valid: both initializers check the rules of §14.3 and throw
/// `SyncMessageError` (ERROR code 6) for anything else.
public struct HaveMessage: Hashable, Sendable {
    /// Most ranges in one message. A reply splits at most this many, and a peer sending more
    /// is refused: the work one message costs stays bounded.
    public static let maxRangeCount = 4096
    /// Most conversation identifiers in one message, over all its id-lists and differing lists.
    public static let maxEntryCount = 4096

    /// Bytes of one id-list entry: conversation (16) and item hash prefix (8).
    static let itemByteCount = ConversationID.byteCount + 8
    /// A range's head byte: the mode in its top two bits, the bound length in the other six.
    static let modeShift: UInt8 = 6
    static let boundLengthMask: UInt8 = 0x3f
    /// The bound length that means the end.
    static let endBoundLength: UInt8 = 0x3f

    public let ranges: [ReconciliationRange]

    /// A message of `ranges`.
    /// - Throws: `SyncMessageError.invalidBody` if they break a rule of §14.3: too many ranges
    ///   or entries, bounds not ascending or an end bound before the last range, entries not
    ///   ascending or outside their range, an empty differing list.
    public init(ranges: [ReconciliationRange]) throws(SyncMessageError) {
        try Self.validate(ranges)
        self.ranges = ranges
    }

    /// A message of ranges known to keep every rule (the first HAVE: see `Reconciler.initiate`).
    init(checkedRanges ranges: [ReconciliationRange]) { self.ranges = ranges }

    /// Whether the receiver must answer: some range still holds a fingerprint or an id-list.
    /// A message of skips and differing lists (or none) ends the reconciliation.
    public var expectsReply: Bool {
        ranges.contains {
            switch $0.mode {
            case .fingerprint, .idList: true
            case .skip, .differing: false
            }
        }
    }

    // MARK: - Validation

    private static func validate(_ ranges: [ReconciliationRange]) throws(SyncMessageError) {
        guard ranges.count <= maxRangeCount else {
            throw .invalidBody(.have, "\(ranges.count) ranges, over the limit of \(maxRangeCount)")
        }
        let entryCount = ranges.reduce(0) { $0 + $1.mode.entryCount }
        guard entryCount <= maxEntryCount else {
            throw .invalidBody(.have, "\(entryCount) conversations, over the limit of \(maxEntryCount)")
        }
        var lower = ReconciliationBound(uncheckedPrefix: [])
        for (index, range) in ranges.enumerated() {
            guard lower.isBelow(range.upperBound) else {
                throw .invalidBody(.have, "range \(index) ends at \(range.upperBound), not above where it starts (\(lower))")
            }
            var previous: ReconciliationKey?
            func checkEntry(_ conversation: ConversationID) throws(SyncMessageError) {
                let key = ReconciliationKey(conversation)
                guard previous.map({ $0 < key }) ?? true else {
                    throw .invalidBody(.have, "range \(index) lists \(conversation) out of ascending order")
                }
                guard lower.key.map({ !(key < $0) }) ?? false, range.upperBound.isAbove(key) else {
                    throw .invalidBody(.have, "range \(index) lists \(conversation), outside the range")
                }
                previous = key
            }
            switch range.mode {
            case .skip, .fingerprint: break
            case .idList(let items):
                for item in items { try checkEntry(item.conversation) }
            case .differing(let conversations):
                guard !conversations.isEmpty else { throw .invalidBody(.have, "range \(index) has an empty differing list") }
                for conversation in conversations { try checkEntry(conversation) }
            }
            lower = range.upperBound
        }
    }

    // MARK: - Reading

    /// Reads a HAVE body: every byte of `body` belongs to the message.
    /// - Throws: `SyncMessageError.truncated(.have)` if it ends inside a field,
    ///   `.trailingBytes` if bytes follow the last range, `.invalidBody` for a bound length of
    ///   17 to 62, and every rule `init(ranges:)` checks. Counts are checked against the limits
    ///   before anything is read or allocated.
    public init(body: ByteBuffer) throws(SyncMessageError) {
        var body = body
        guard let rangeCount = body.readInteger(as: UInt16.self) else { throw .truncated(.have) }
        guard rangeCount <= Self.maxRangeCount else {
            throw .invalidBody(.have, "\(rangeCount) ranges, over the limit of \(Self.maxRangeCount)")
        }
        var ranges: [ReconciliationRange] = []
        ranges.reserveCapacity(Int(rangeCount))
        var entryCount = 0
        for _ in 0..<rangeCount {
            guard let head = body.readInteger(as: UInt8.self) else { throw .truncated(.have) }
            let bound = try Self.readBound(length: head & Self.boundLengthMask, &body)
            let mode: ReconciliationRange.Mode
            switch head >> Self.modeShift {
            case 0:
                mode = .skip
            case 1:
                guard let bytes = body.readBytes(length: RangeFingerprint.byteCount), let fingerprint = RangeFingerprint(bytes: bytes)
                else { throw .truncated(.have) }
                mode = .fingerprint(fingerprint)
            case 2:
                let count = try Self.readCount(&body, entryByteCount: Self.itemByteCount, entriesSoFar: &entryCount)
                var items: [ReconciliationItem] = []
                items.reserveCapacity(count)
                for _ in 0..<count {
                    guard let conversation = Self.readConversation(&body), let prefix = body.readInteger(as: UInt64.self) else {
                        throw .truncated(.have)
                    }
                    items.append(ReconciliationItem(conversation: conversation, hashPrefix: prefix))
                }
                mode = .idList(items)
            default:  // 3, the last value two bits hold
                let count = try Self.readCount(&body, entryByteCount: ConversationID.byteCount, entriesSoFar: &entryCount)
                var conversations: [ConversationID] = []
                conversations.reserveCapacity(count)
                for _ in 0..<count {
                    guard let conversation = Self.readConversation(&body) else { throw .truncated(.have) }
                    conversations.append(conversation)
                }
                mode = .differing(conversations)
            }
            ranges.append(ReconciliationRange(upperBound: bound, mode: mode))
        }
        guard body.readableBytes == 0 else { throw .trailingBytes(.have, body.readableBytes) }
        try self.init(ranges: ranges)
    }

    /// Reads a HAVE body from bytes.
    public init(body: [UInt8]) throws(SyncMessageError) {
        try self.init(body: ByteBuffer(bytes: body))
    }

    /// The bound whose length the head byte gave: the end, or that many bytes of prefix.
    /// A conversation identifier, nil when the body is cut short.
    private static func readConversation(_ body: inout ByteBuffer) -> ConversationID? {
        body.readBytes(length: ConversationID.byteCount).flatMap(ConversationID.init(bytes:))
    }

    private static func readBound(length: UInt8, _ body: inout ByteBuffer) throws(SyncMessageError) -> ReconciliationBound {
        if length == endBoundLength { return .end }
        guard length <= ReconciliationBound.maxPrefixByteCount else {
            throw .invalidBody(.have, "a bound length of \(length), neither 0 to \(ReconciliationBound.maxPrefixByteCount) nor \(endBoundLength) (the end)")
        }
        guard let prefix = body.readBytes(length: Int(length)) else { throw .truncated(.have) }
        return ReconciliationBound(uncheckedPrefix: prefix)
    }

    /// Reads a list's u16 count and checks it against the entry limit and the bytes left, so
    /// the entries that follow are there to read.
    private static func readCount(
        _ body: inout ByteBuffer, entryByteCount: Int, entriesSoFar: inout Int
    ) throws(SyncMessageError) -> Int {
        guard let count = body.readInteger(as: UInt16.self).map(Int.init) else { throw .truncated(.have) }
        entriesSoFar += count
        guard entriesSoFar <= maxEntryCount else {
            throw .invalidBody(.have, "over \(maxEntryCount) conversations in one message")
        }
        guard body.readableBytes >= count * entryByteCount else { throw .truncated(.have) }
        return count
    }

    // MARK: - Writing

    /// Bytes `encodeBody(into:)` writes.
    public var bodyByteCount: Int {
        2 + ranges.reduce(0) { total, range in
            let head = 1 + (range.upperBound.prefix?.count ?? 0)
            let payload: Int =
                switch range.mode {
                case .skip: 0
                case .fingerprint: RangeFingerprint.byteCount
                case .idList(let items): 2 + items.count * Self.itemByteCount
                case .differing(let conversations): 2 + conversations.count * ConversationID.byteCount
                }
            return total + head + payload
        }
    }

    /// Writes the body (§14.3); returns the byte count.
    @discardableResult
    public func encodeBody(into buffer: inout ByteBuffer) -> Int {
        let start = buffer.writerIndex
        buffer.writeInteger(UInt16(ranges.count))
        for range in ranges {
            let mode = range.mode.byte << Self.modeShift
            if let prefix = range.upperBound.prefix {
                buffer.writeInteger(mode | UInt8(prefix.count))
                buffer.writeBytes(prefix)
            } else {
                buffer.writeInteger(mode | Self.endBoundLength)
            }
            switch range.mode {
            case .skip: break
            case .fingerprint(let fingerprint): buffer.writeBytes(fingerprint.bytes)
            case .idList(let items):
                buffer.writeInteger(UInt16(items.count))
                for item in items {
                    buffer.writeBytes(item.conversation.bytes)
                    buffer.writeInteger(item.hashPrefix)
                }
            case .differing(let conversations):
                buffer.writeInteger(UInt16(conversations.count))
                for conversation in conversations { buffer.writeBytes(conversation.bytes) }
            }
        }
        return buffer.writerIndex - start
    }

    /// The body as a buffer, ready for `SyncEnvelope(type: .have, body:)`.
    public var body: ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(bodyByteCount)
        encodeBody(into: &buffer)
        return buffer
    }

    /// The body's bytes.
    public var bodyBytes: [UInt8] { Array(body.readableBytesView) }
}
