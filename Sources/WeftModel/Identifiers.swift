import WeftCrypto

/// A conversation's identifier: 16 random bytes chosen by its creator (SPEC.md §12).
public struct ConversationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let byteCount = 16
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    public static func random() -> ConversationID { ConversationID(bytes: secureRandomBytes(byteCount))! }

    public static func < (lhs: ConversationID, rhs: ConversationID) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }

    public var hex: String { bytes.hexString }
    public var description: String { hex }
}

/// An operation's identifier: BLAKE2b-256 of its canonical encoding (SPEC.md §12). A message's
/// identifier is the identifier of the operation that posted it.
public struct OperationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let byteCount = 32
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    init(hashing encoding: [UInt8]) {
        self.bytes = BLAKE2b.hash(encoding, outputByteCount: Self.byteCount)
    }

    public static func < (lhs: OperationID, rhs: OperationID) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }

    public var hex: String { bytes.hexString }
    public var description: String { String(hex.prefix(16)) }
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
