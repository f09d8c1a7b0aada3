import WeftCrypto
import WeftModel

/// A node of a content's hash tree (SPEC.md §17.3): BLAKE2b-256 of a chunk (a leaf) or of two
/// nodes (an inner node).
public struct ChunkHash: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 32
    public let bytes: [UInt8]

    /// Nil unless `bytes` holds exactly 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// `bytes` is a BLAKE2b-256 output.
    init(hashOutput bytes: [UInt8]) {
        assert(bytes.count == Self.byteCount)
        self.bytes = bytes
    }

    public var hex: String {
        String(decoding: bytes.flatMap { [Self.digits[Int($0 >> 4)], Self.digits[Int($0 & 0x0f)]] }, as: UTF8.self)
    }

    public var description: String { String(hex.prefix(16)) }

    private static let digits = Array("0123456789abcdef".utf8)
}

/// The hash tree over a content's chunks (SPEC.md §17.3).
///
/// leaf = BLAKE2b-256(0x00 || chunk); inner = BLAKE2b-256(0x01 || left || right). Each level
/// pairs the nodes of the level below in order, first with second, third with fourth, ...; a
/// lone last node is promoted unchanged. The root is the one node of the top level, so the
/// root of one chunk is its leaf.
public enum ContentTree {
    /// The domain byte before a chunk.
    public static let leafPrefix: UInt8 = 0x00
    /// The domain byte before two nodes.
    public static let innerPrefix: UInt8 = 0x01

    /// BLAKE2b-256(0x00 || chunk).
    public static func leafHash(of chunk: UnsafeRawBufferPointer) -> ChunkHash {
        let hasher = BLAKE2b.Hasher(outputByteCount: ChunkHash.byteCount)
        hasher.update([leafPrefix])
        hasher.update(rawBytes: chunk)
        return ChunkHash(hashOutput: hasher.finalize())
    }

    public static func leafHash(of chunk: [UInt8]) -> ChunkHash {
        chunk.withUnsafeBytes { leafHash(of: $0) }
    }

    /// BLAKE2b-256(0x01 || left || right).
    public static func innerHash(_ left: ChunkHash, _ right: ChunkHash) -> ChunkHash {
        ChunkHash(hashOutput: BLAKE2b.hash([innerPrefix], left.bytes, right.bytes, outputByteCount: ChunkHash.byteCount))
    }

    /// The root over `leaves`, in chunk order. `leaves` must not be empty (content has at
    /// least one chunk); callers check the count against a descriptor first.
    public static func root(of leaves: [ChunkHash]) -> ContentRoot {
        precondition(!leaves.isEmpty, "content has at least one chunk")
        var level = leaves
        while level.count > 1 {
            var next: [ChunkHash] = []
            next.reserveCapacity((level.count + 1) / 2)
            var index = 0
            while index + 1 < level.count {
                next.append(innerHash(level[index], level[index + 1]))
                index += 2
            }
            if index < level.count { next.append(level[index]) }  // a lone last node goes up as it is
            level = next
        }
        // A ChunkHash is always 32 bytes, as a root is.
        guard let root = ContentRoot(bytes: level[0].bytes) else { preconditionFailure("a hash is 32 bytes") }
        return root
    }
}
