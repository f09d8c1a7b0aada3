import NIOCore
import WeftModel

/// A content's descriptor with the leaf hash of every chunk (SPEC.md §17.4): what a receiver
/// needs to verify each chunk on its own, whatever order chunks come in and whoever sends them.
///
/// Wire encoding: `descriptor (41) || count u32 || count × hash (32)`.
public struct ContentManifest: Hashable, Sendable {
    public let descriptor: ContentDescriptor
    /// The leaf hashes (§17.3), in chunk order.
    public let hashes: [ChunkHash]

    /// Length of the fields before the hashes: the descriptor and the count.
    public static let headerByteCount = ContentDescriptor.encodedByteCount + 4
    /// The longest wire encoding: `maxChunkCount` hashes (524,333 bytes).
    public static let maxWireByteCount = headerByteCount + ContentDescriptor.maxChunkCount * ChunkHash.byteCount

    /// Checks `hashes` against `descriptor`: throws `.chunkCountMismatch` unless there is one
    /// per chunk, `.rootMismatch` unless their tree's root is the descriptor's.
    public init(descriptor: ContentDescriptor, hashes: [ChunkHash]) throws(ContentError) {
        guard hashes.count == descriptor.chunkCount else {
            throw ContentError(
                .chunkCountMismatch,
                "a manifest lists \(hashes.count) chunk hashes for content of \(descriptor.chunkCount) chunks"
            )
        }
        let root = ContentTree.root(of: hashes)
        guard root == descriptor.root else {
            throw ContentError(
                .rootMismatch,
                "a manifest's chunk hashes make the root \(root.hex), not its descriptor's \(descriptor.root.hex)"
            )
        }
        self.init(checkedDescriptor: descriptor, hashes: hashes)
    }

    /// `hashes` are known to make `descriptor`'s root (the builder computed it from them).
    init(checkedDescriptor descriptor: ContentDescriptor, hashes: [ChunkHash]) {
        self.descriptor = descriptor
        self.hashes = hashes
    }

    public var root: ContentRoot { descriptor.root }

    // MARK: - Wire

    /// Reads a manifest that is all of `wire`, checking in this order (§17.4): the descriptor
    /// (`.malformedDescriptor`); the count is there (`.malformedManifest`) and equals the
    /// descriptor's chunk count (`.chunkCountMismatch`); the hashes fit the bytes left
    /// (`.malformedManifest`, checked before anything is allocated); no bytes follow them
    /// (`.malformedManifest`); the root (`.rootMismatch`).
    public init(wire: ByteBuffer) throws(ContentError) {
        var buffer = wire
        try self.init(reading: &buffer, wholeBuffer: true)
    }

    /// Reads a manifest at the reader index and moves past it, leaving any bytes after it;
    /// checks as `init(wire:)` does but for bytes after the hashes. The reader index stays
    /// where it was if it throws.
    public init(reading buffer: inout ByteBuffer) throws(ContentError) {
        try self.init(reading: &buffer, wholeBuffer: false)
    }

    private init(reading buffer: inout ByteBuffer, wholeBuffer: Bool) throws(ContentError) {
        var copy = buffer
        let descriptor = try ContentDescriptor(reading: &copy)
        guard let count = copy.readInteger(as: UInt32.self) else {
            throw ContentError(.malformedManifest, "a manifest ends before its chunk count")
        }
        guard count == descriptor.chunkCount else {
            throw ContentError(
                .chunkCountMismatch,
                "a manifest counts \(count) chunk hashes for content of \(descriptor.chunkCount) chunks"
            )
        }
        // count ≤ maxChunkCount here, so the product cannot overflow.
        let hashesByteCount = Int(count) * ChunkHash.byteCount
        guard hashesByteCount <= copy.readableBytes else {
            throw ContentError(
                .malformedManifest,
                "a manifest of \(count) chunk hashes needs \(hashesByteCount) bytes; \(copy.readableBytes) are left"
            )
        }
        if wholeBuffer, copy.readableBytes > hashesByteCount {
            throw ContentError(
                .malformedManifest,
                "a manifest is followed by \(copy.readableBytes - hashesByteCount) bytes"
            )
        }
        var hashes: [ChunkHash] = []
        hashes.reserveCapacity(Int(count))
        copy.withUnsafeReadableBytes { raw in
            for start in stride(from: 0, to: hashesByteCount, by: ChunkHash.byteCount) {
                hashes.append(ChunkHash(hashOutput: Array(raw[start..<(start + ChunkHash.byteCount)])))
            }
        }
        copy.moveReaderIndex(forwardBy: hashesByteCount)
        try self.init(descriptor: descriptor, hashes: hashes)
        buffer = copy
    }

    /// Writes the wire encoding; returns its byte count.
    @discardableResult
    public func write(to buffer: inout ByteBuffer) -> Int {
        var written = descriptor.write(to: &buffer)
        written += buffer.writeInteger(UInt32(hashes.count))
        for hash in hashes { written += buffer.writeBytes(hash.bytes) }
        return written
    }

    /// The length of the wire encoding.
    public var wireByteCount: Int { Self.headerByteCount + hashes.count * ChunkHash.byteCount }

    /// The wire encoding in a buffer of its own.
    public var wire: ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(wireByteCount)
        write(to: &buffer)
        return buffer
    }
}
