import WeftCrypto

/// A conversation's identifier: 16 random bytes chosen by its creator (SPEC.md §12).
public struct ConversationID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let byteCount = 16
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    public func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }

    public static func random() -> ConversationID { ConversationID(bytes: secureRandomBytes(byteCount))! }

    public static func < (lhs: ConversationID, rhs: ConversationID) -> Bool { compareBytes(lhs.bytes, rhs.bytes) < 0 }
    public static func == (lhs: ConversationID, rhs: ConversationID) -> Bool { compareBytes(lhs.bytes, rhs.bytes) == 0 }

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

    public func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }

    init(hashing encoding: [UInt8]) {
        self.bytes = BLAKE2b.hash(encoding, outputByteCount: Self.byteCount)
    }

    public static func < (lhs: OperationID, rhs: OperationID) -> Bool { compareBytes(lhs.bytes, rhs.bytes) < 0 }
    public static func == (lhs: OperationID, rhs: OperationID) -> Bool { compareBytes(lhs.bytes, rhs.bytes) == 0 }

    public var hex: String { bytes.hexString }
    public var description: String { String(hex.prefix(16)) }
}

/// Compares byte strings in lexicographic order, eight bytes at a time: identifiers and keys
/// are compared and sorted everywhere in the merge rules.
@inline(__always)
func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { x in
        b.withUnsafeBytes { y in
            let common = min(x.count, y.count)
            var offset = 0
            while offset + 8 <= common {
                let u = UInt64(bigEndian: x.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                let v = UInt64(bigEndian: y.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
                if u != v { return u < v ? -1 : 1 }
                offset += 8
            }
            while offset < common {
                if x[offset] != y[offset] { return x[offset] < y[offset] ? -1 : 1 }
                offset += 1
            }
            return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
        }
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
