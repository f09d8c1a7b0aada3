import NIOCore

// MARK: - Root

/// The root of a content's hash tree (SPEC.md §17.3): 32 bytes that name the content and
/// verify every chunk of it.
public struct ContentRoot: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let byteCount = 32
    public let bytes: [UInt8]
    /// The bytes as words, for comparing and hashing.
    private let words: ByteWords

    /// Nil unless `bytes` holds exactly 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
        words = ByteWords(bytes)
    }

    public func hash(into hasher: inout Hasher) { words.hash(into: &hasher) }

    public static func < (lhs: ContentRoot, rhs: ContentRoot) -> Bool { lhs.words < rhs.words }
    public static func == (lhs: ContentRoot, rhs: ContentRoot) -> Bool { lhs.words == rhs.words }

    /// All 64 lowercase hex digits.
    public var hex: String { bytes.hexString }
    public var description: String { hex }
}

// MARK: - Descriptor

/// What a signed message carries of a rich-content part instead of its bytes (SPEC.md §17.1):
/// the content's size, its chunk size and the root of its hash tree. The part's MIME type
/// stays beside it in the part; it is not in the descriptor.
///
/// Encoding (41 bytes): `byteCount u64 || chunkLog u8 || root (32)`.
public struct ContentDescriptor: Hashable, Sendable, CustomStringConvertible {
    /// Length of the encoding.
    public static let encodedByteCount = 8 + 1 + ContentRoot.byteCount
    /// Chunks are 2^chunkLog bytes: 16 KiB to 512 KiB. A chunk message of the largest, sent
    /// raw, still fits one DATA frame (§5).
    public static let chunkLogRange: ClosedRange<UInt8> = 14...19
    /// Most chunks one content may have: its manifest (32 bytes a chunk) then fits one DATA
    /// frame with room to spare.
    public static let maxChunkCount = 16_384
    /// The largest content: the most chunks of the largest size (8 GiB).
    public static let maxByteCount = UInt64(maxChunkCount) << UInt64(chunkLogRange.upperBound)

    /// The content's length in bytes, at least 1.
    public let byteCount: UInt64
    /// Every chunk but the last is 2^chunkLog bytes; the last holds the rest (1 to 2^chunkLog).
    public let chunkLog: UInt8
    /// The root of the hash tree over the chunks (§17.3).
    public let root: ContentRoot

    /// A descriptor, checked as a reader checks one: throws `.malformedDescriptor` if
    /// `byteCount` is 0, `chunkLog` is outside `chunkLogRange` or the content would have more
    /// than `maxChunkCount` chunks.
    public init(byteCount: UInt64, chunkLog: UInt8, root: ContentRoot) throws(ContentError) {
        guard byteCount >= 1 else { throw ContentError(.malformedDescriptor, "a content descriptor's size is 0") }
        guard Self.chunkLogRange.contains(chunkLog) else {
            throw ContentError(
                .malformedDescriptor,
                "a content descriptor's chunkLog \(chunkLog) is outside \(Self.chunkLogRange.lowerBound)...\(Self.chunkLogRange.upperBound)"
            )
        }
        let chunkCount = Self.chunkCount(byteCount: byteCount, chunkLog: chunkLog)
        guard chunkCount <= UInt64(Self.maxChunkCount) else {
            throw ContentError(
                .malformedDescriptor,
                "a content descriptor of \(byteCount) bytes in chunks of 2^\(chunkLog) has \(chunkCount) chunks, more than \(Self.maxChunkCount)"
            )
        }
        self.byteCount = byteCount
        self.chunkLog = chunkLog
        self.root = root
    }

    /// Reads a descriptor that is exactly `encoding`: throws `.malformedDescriptor` for any
    /// other length or any field out of bounds.
    public init(encoding: [UInt8]) throws(ContentError) {
        guard encoding.count == Self.encodedByteCount else {
            throw ContentError(
                .malformedDescriptor,
                "a content descriptor is \(Self.encodedByteCount) bytes, not \(encoding.count)"
            )
        }
        var buffer = ByteBuffer(bytes: encoding)
        try self.init(reading: &buffer)
    }

    /// Reads a descriptor at the reader index and moves past it. Throws `.malformedDescriptor`
    /// if fewer than 41 bytes are left or a field is out of bounds; the reader index then stays.
    public init(reading buffer: inout ByteBuffer) throws(ContentError) {
        guard let byteCount = buffer.getInteger(at: buffer.readerIndex, as: UInt64.self),
            let chunkLog = buffer.getInteger(at: buffer.readerIndex + 8, as: UInt8.self),
            let rootBytes = buffer.getBytes(at: buffer.readerIndex + 9, length: ContentRoot.byteCount),
            let root = ContentRoot(bytes: rootBytes)
        else {
            throw ContentError(
                .malformedDescriptor,
                "a content descriptor is \(Self.encodedByteCount) bytes; \(buffer.readableBytes) are left"
            )
        }
        try self.init(byteCount: byteCount, chunkLog: chunkLog, root: root)
        buffer.moveReaderIndex(forwardBy: Self.encodedByteCount)
    }

    /// The 41-byte encoding.
    public var encoding: [UInt8] {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(Self.encodedByteCount)
        write(to: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// Writes the encoding; returns its byte count (41).
    @discardableResult
    public func write(to buffer: inout ByteBuffer) -> Int {
        buffer.writeInteger(byteCount) + buffer.writeInteger(chunkLog) + buffer.writeBytes(root.bytes)
    }

    // MARK: Chunks

    /// 2^chunkLog: the length of every chunk but the last.
    public var chunkByteCount: Int { 1 << Int(chunkLog) }

    /// ceil(byteCount / 2^chunkLog), 1 to `maxChunkCount`.
    public var chunkCount: Int { Int(Self.chunkCount(byteCount: byteCount, chunkLog: chunkLog)) }

    /// The length of chunk `index`, or nil if the content has no such chunk.
    public func byteCount(ofChunk index: Int) -> Int? {
        guard index >= 0, index < chunkCount else { return nil }
        let start = UInt64(index) << UInt64(chunkLog)
        return Int(min(UInt64(chunkByteCount), byteCount - start))
    }

    /// Where chunk `index` starts in the content, or nil if the content has no such chunk.
    public func offset(ofChunk index: Int) -> UInt64? {
        guard index >= 0, index < chunkCount else { return nil }
        return UInt64(index) << UInt64(chunkLog)
    }

    static func chunkCount(byteCount: UInt64, chunkLog: UInt8) -> UInt64 {
        // Without overflow: byteCount + 2^chunkLog - 1 could pass UInt64.max.
        let whole = byteCount >> UInt64(chunkLog)
        return byteCount & ((1 << UInt64(chunkLog)) - 1) == 0 ? whole : whole + 1
    }

    public var description: String { "\(byteCount) bytes in chunks of 2^\(chunkLog), root \(root.hex.prefix(16))" }
}
