import WeftCrypto
import WeftModel

/// Where a range of a HAVE message ends (SPEC.md §14.3): a prefix of 0 to 16 bytes of a
/// conversation identifier, standing for that prefix padded with zero bytes to 16, or the end
/// of the identifier space. A range holds the conversations at or above its lower bound (the
/// previous range's upper bound, or sixteen zero bytes for the first) and below its upper.
public struct ReconciliationBound: Hashable, Sendable, CustomStringConvertible {
    /// The longest prefix: a whole conversation identifier.
    public static let maxPrefixByteCount = ConversationID.byteCount

    /// The prefix's bytes; nil for the end.
    public let prefix: [UInt8]?

    /// Above every conversation identifier.
    public static let end = ReconciliationBound(uncheckedPrefix: nil)

    /// A bound at `prefix` padded with zero bytes; nil if it is longer than 16 bytes.
    public init?(prefix: [UInt8]) {
        guard prefix.count <= Self.maxPrefixByteCount else { return nil }
        self.init(uncheckedPrefix: prefix)
    }

    init(uncheckedPrefix prefix: [UInt8]?) {
        self.prefix = prefix
        key = prefix.map { ReconciliationKey(bytes: $0) }
    }

    /// The padded prefix as a key; nil for the end.
    let key: ReconciliationKey?

    public var isEnd: Bool { prefix == nil }

    /// Whether this bound lies strictly below `other` in the identifier order.
    func isBelow(_ other: ReconciliationBound) -> Bool {
        guard let key else { return false }
        guard let otherKey = other.key else { return true }
        return key < otherKey
    }

    /// Whether `key` lies below this bound.
    func isAbove(_ key: ReconciliationKey) -> Bool {
        guard let bound = self.key else { return true }
        return key < bound
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.prefix == rhs.prefix }
    public func hash(into hasher: inout Hasher) { hasher.combine(prefix) }

    public var description: String { prefix.map { $0.isEmpty ? "(empty)" : $0.reconciliationHex } ?? "end" }
}

/// The fingerprint of a range's items (SPEC.md §14.3): BLAKE2b-64(sum || count), where sum is
/// the 32-byte little-endian sum modulo 2^256 of the item hashes and count the number of items
/// as a u64. Sums add up, so a node keeps prefix sums and fingerprints any range at once; the
/// count and the hash make a crafted sum harder to hit. Eight bytes: two different ranges
/// fingerprint alike by accident with a chance of about 2^-64 per comparison.
public struct RangeFingerprint: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 8

    public let bytes: [UInt8]

    /// A fingerprint of 8 bytes; nil for another length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    init(sum: Sum256, count: Int) {
        let countBytes = withUnsafeBytes(of: UInt64(count).bigEndian) { Array($0) }
        bytes = BLAKE2b.hash(sum.littleEndianBytes, countBytes, outputByteCount: Self.byteCount)
    }

    public var description: String { bytes.reconciliationHex }
}

/// One entry of an id-list (SPEC.md §14.3): a conversation the sender holds and the first 8
/// bytes of its item hash, which tell whether the receiver's log has the same digest.
public struct ReconciliationItem: Hashable, Sendable, CustomStringConvertible {
    public var conversation: ConversationID
    /// The first 8 bytes of BLAKE2b-256(conversation || digest), read big-endian.
    public var hashPrefix: UInt64

    public init(conversation: ConversationID, hashPrefix: UInt64) {
        self.conversation = conversation
        self.hashPrefix = hashPrefix
    }

    public var description: String { "\(conversation.hex):\(String(hashPrefix, radix: 16))" }
}

/// One range of a HAVE message: its upper bound and what the sender says about its items.
public struct ReconciliationRange: Hashable, Sendable {
    /// What a range says (SPEC.md §14.3). `byte` is the mode on the wire (the top two bits of
    /// the range's head byte).
    public enum Mode: Hashable, Sendable {
        /// Nothing left to do here: the fingerprints matched, or the range is settled.
        case skip
        /// The sender's fingerprint of its items in the range; the receiver compares its own.
        case fingerprint(RangeFingerprint)
        /// Every item the sender holds in the range, ascending; the receiver works out the
        /// difference and answers with it.
        case idList([ReconciliationItem])
        /// The answer to an id-list: every conversation in the range whose log differs or is
        /// held on one side only, ascending, at least one.
        case differing([ConversationID])

        var byte: UInt8 {
            switch self {
            case .skip: 0
            case .fingerprint: 1
            case .idList: 2
            case .differing: 3
            }
        }

        /// Conversation identifiers the mode carries (the per-message entry limit counts them).
        var entryCount: Int {
            switch self {
            case .skip, .fingerprint: 0
            case .idList(let items): items.count
            case .differing(let conversations): conversations.count
            }
        }
    }

    public var upperBound: ReconciliationBound
    public var mode: Mode

    public init(upperBound: ReconciliationBound, mode: Mode) {
        self.upperBound = upperBound
        self.mode = mode
    }
}

extension Array where Element == UInt8 {
    /// Lowercase hex, for descriptions.
    var reconciliationHex: String { map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
}
