import WeftModel

/// Builds the descriptor and manifest of content a sender has, one chunk at a time, so the
/// content need never be in memory whole (SPEC.md §17.2–§17.4).
///
/// The size must be known first (it sets the chunk size); then every chunk is appended in
/// order, each exactly `nextChunkByteCount` bytes, and `finish()` gives the manifest.
///
///     var builder = try ContentManifestBuilder(byteCount: fileSize)
///     while let length = builder.nextChunkByteCount {
///         try builder.append(read(length))
///     }
///     let manifest = try builder.finish()
public struct ContentManifestBuilder: Sendable {
    /// The content's size.
    public let byteCount: UInt64
    /// The chunking rule's chunk size for that size (§17.2).
    public let chunkLog: UInt8
    /// The chunk count for that size.
    public let chunkCount: Int
    /// The leaf hashes of the chunks appended so far.
    public private(set) var hashes: [ChunkHash] = []

    /// Throws `.unsupportedSize` for 0 bytes or more than `ContentDescriptor.maxByteCount`.
    public init(byteCount: UInt64) throws(ContentError) {
        self.byteCount = byteCount
        chunkLog = try ContentChunking.chunkLog(forByteCount: byteCount)
        let chunkByteCount = UInt64(1) << UInt64(chunkLog)
        chunkCount = Int((byteCount - 1) / chunkByteCount + 1)
        hashes.reserveCapacity(chunkCount)
    }

    /// 2^chunkLog: the length of every chunk but the last.
    public var chunkByteCount: Int { 1 << Int(chunkLog) }

    /// The index of the next chunk to append (`chunkCount` once all are in).
    public var nextChunkIndex: Int { hashes.count }

    /// The length the next chunk must have, or nil once every chunk is in.
    public var nextChunkByteCount: Int? {
        guard hashes.count < chunkCount else { return nil }
        let start = UInt64(hashes.count) << UInt64(chunkLog)
        return Int(min(UInt64(chunkByteCount), byteCount - start))
    }

    /// Hashes the next chunk. Throws `.wrongSize` unless it is `nextChunkByteCount` bytes (or
    /// if every chunk is in already); nothing is appended then.
    public mutating func append(_ chunk: UnsafeRawBufferPointer) throws(ContentError) {
        guard let expected = nextChunkByteCount else {
            throw ContentError(.wrongSize, "all \(chunkCount) chunks of the content are in already")
        }
        guard chunk.count == expected else {
            throw ContentError(.wrongSize, "chunk \(hashes.count) is \(chunk.count) bytes, not \(expected)")
        }
        hashes.append(ContentTree.leafHash(of: chunk))
    }

    /// Appends the next chunk by its leaf hash, computed elsewhere (so a sender can hash
    /// several chunks at once, on several cores): the caller hashed exactly
    /// `nextChunkByteCount` bytes with `ContentTree.leafHash`. Throws `.wrongSize` once every
    /// chunk is in.
    public mutating func append(leafHash: ChunkHash) throws(ContentError) {
        guard nextChunkByteCount != nil else {
            throw ContentError(.wrongSize, "all \(chunkCount) chunks of the content are in already")
        }
        hashes.append(leafHash)
    }

    public mutating func append(_ chunk: [UInt8]) throws(ContentError) {
        let result = chunk.withUnsafeBytes { raw in
            Result { () throws(ContentError) in try append(raw) }
        }
        try result.get()
    }

    /// The manifest, once every chunk is in; throws `.wrongSize` before.
    public func finish() throws(ContentError) -> ContentManifest {
        guard hashes.count == chunkCount else {
            throw ContentError(.wrongSize, "only \(hashes.count) of the content's \(chunkCount) chunks are in")
        }
        let descriptor = try ContentDescriptor(byteCount: byteCount, chunkLog: chunkLog, root: ContentTree.root(of: hashes))
        return ContentManifest(checkedDescriptor: descriptor, hashes: hashes)
    }

    /// The manifest of `content`, whole in memory. Throws `.unsupportedSize` for empty content
    /// or content past `ContentDescriptor.maxByteCount`.
    public static func manifest(of content: [UInt8]) throws(ContentError) -> ContentManifest {
        var builder = try ContentManifestBuilder(byteCount: UInt64(content.count))
        let result = content.withUnsafeBytes { raw in
            Result { () throws(ContentError) in
                var start = 0
                while let length = builder.nextChunkByteCount {
                    try builder.append(UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)]))
                    start += length
                }
            }
        }
        try result.get()
        return try builder.finish()
    }
}
