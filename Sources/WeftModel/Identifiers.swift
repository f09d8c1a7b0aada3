import WeftCrypto

/// A conversation's identifier: 16 bytes derived from its creation (SPEC.md §12.2).
public struct ConversationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let byteCount = 16
    public let bytes: [UInt8]
    /// The bytes as words, for comparing and hashing.
    private let words: ByteWords

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
        words = ByteWords(bytes)
    }

    public func hash(into hasher: inout Hasher) { words.hash(into: &hasher) }

    public static func random() -> ConversationID { ConversationID(bytes: secureRandomBytes(byteCount))! }

    public static func < (lhs: ConversationID, rhs: ConversationID) -> Bool { lhs.words < rhs.words }
    public static func == (lhs: ConversationID, rhs: ConversationID) -> Bool { lhs.words == rhs.words }

    public var hex: String { bytes.hexString }
    public var description: String { hex }
}

/// An operation's identifier: BLAKE2b-256 of its canonical encoding (SPEC.md §12). A message's
/// identifier is the identifier of the operation that posted it.
public struct OperationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let byteCount = 32
    public let bytes: [UInt8]
    /// The bytes as words, for comparing and hashing.
    private let words: ByteWords

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
        words = ByteWords(bytes)
    }

    public func hash(into hasher: inout Hasher) { words.hash(into: &hasher) }

    init(hashing encoding: [UInt8]) {
        bytes = BLAKE2b.hash(encoding, outputByteCount: Self.byteCount)
        words = ByteWords(bytes)
    }

    public static func < (lhs: OperationID, rhs: OperationID) -> Bool { lhs.words < rhs.words }
    public static func == (lhs: OperationID, rhs: OperationID) -> Bool { lhs.words == rhs.words }

    public var hex: String { bytes.hexString }
    public var description: String { String(hex.prefix(16)) }
}

/// Up to 32 bytes as four big-endian words (zero-padded): equal, ordered and hashed like the
/// bytes, without going through an array. Identifiers are compared and hashed everywhere in the
/// merge rules.
struct ByteWords: Hashable, Comparable, Sendable {
    private var first: UInt64 = 0
    private var second: UInt64 = 0
    private var third: UInt64 = 0
    private var fourth: UInt64 = 0

    init(_ bytes: [UInt8]) {
        precondition(bytes.count == 16 || bytes.count == 32, "identifiers are 16 or 32 bytes")
        bytes.withUnsafeBytes { raw in
            first = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            second = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            if raw.count == 32 {
                third = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
                fourth = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
            }
        }
    }

    static func < (lhs: ByteWords, rhs: ByteWords) -> Bool {
        if lhs.first != rhs.first { return lhs.first < rhs.first }
        if lhs.second != rhs.second { return lhs.second < rhs.second }
        if lhs.third != rhs.third { return lhs.third < rhs.third }
        return lhs.fourth < rhs.fourth
    }

    static func == (lhs: ByteWords, rhs: ByteWords) -> Bool {
        lhs.first == rhs.first && lhs.second == rhs.second && lhs.third == rhs.third && lhs.fourth == rhs.fourth
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(first)
        hasher.combine(second)
        hasher.combine(third)
        hasher.combine(fourth)
    }
}

/// A user: the Ed25519 public key of a node identity.
public typealias UserID = PublicIdentity

extension Array where Element == UInt8 {
    var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
