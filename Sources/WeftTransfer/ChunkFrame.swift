import NIOCore
import WeftCompression
import WeftModel

/// How one chunk travels (SPEC.md §17.5): `flags u8 || payload`. Flag bit 0 set: the payload is
/// zstd data that decompresses to the chunk; clear: the payload is the chunk. Other bits are 0.
public enum ChunkFrame {
    /// Flag bit 0: the payload is zstd-compressed.
    public static let compressedFlag: UInt8 = 0x01
    /// Length of the flags field.
    public static let flagsByteCount = 1
    /// zstd's level for chunks: fast, since chunks are compressed once per send.
    public static let compressionLevel: Int32 = 1
    /// A compressed payload is sent only if it saves at least this share of the chunk, in
    /// percent: its length × 100 ≤ the chunk's length × (100 − 3).
    public static let minimumSavingPercent = 3

    /// The raw frame of `chunk`: `00 || chunk`.
    public static func raw(_ chunk: UnsafeRawBufferPointer) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.reserveCapacity(flagsByteCount + chunk.count)
        frame.writeInteger(UInt8(0))
        frame.writeBytes(chunk)
        return frame
    }
}

// MARK: - Encoder

/// Makes chunk frames, one zstd context for all the chunks it encodes.
///
/// Not `Sendable`: one task uses it at a time.
public final class ChunkFrameEncoder {
    private let compressor = ZstdCompressor(level: ChunkFrame.compressionLevel)

    public init() {}

    /// The frame of `chunk`, a chunk of content of `mimeType`: raw if that type is compressed
    /// already (`CompressedMediaTypes`), else compressed as one zstd frame of its own if that
    /// saves at least 3 %, else raw.
    public func encode(_ chunk: UnsafeRawBufferPointer, mimeType: String) -> ByteBuffer {
        guard let compressed = compressed(chunk, mimeType: mimeType) else { return ChunkFrame.raw(chunk) }
        var frame = ByteBuffer()
        frame.reserveCapacity(ChunkFrame.flagsByteCount + compressed.count)
        frame.writeInteger(ChunkFrame.compressedFlag)
        frame.writeBytes(compressed)
        return frame
    }

    /// The zstd frame that `encode` would send `chunk` as (its payload after the flag 1), or
    /// nil if it would send it raw. For a caller that has the chunk's bytes where a raw frame
    /// of it goes, and copies only what compression replaces them with.
    public func compressed(_ chunk: UnsafeRawBufferPointer, mimeType: String) -> [UInt8]? {
        guard !CompressedMediaTypes.contains(mimeType) else { return nil }
        let compressed = compressor.compress(chunk)
        return compressed.count * 100 <= chunk.count * (100 - ChunkFrame.minimumSavingPercent) ? compressed : nil
    }

    public func encode(_ chunk: [UInt8], mimeType: String) -> ByteBuffer {
        chunk.withUnsafeBytes { encode($0, mimeType: mimeType) }
    }
}

// MARK: - Decoder

/// Reads chunk frames and verifies each chunk against a manifest (SPEC.md §17.6), one zstd
/// context for all of them.
///
/// Not `Sendable`: one task uses it at a time.
public final class ChunkFrameDecoder {
    private let decompressor = ZstdDecompressor()

    public init() {}

    /// The bytes of chunk `index` of `manifest`'s content from `frame`, checked in this order
    /// (§17.6): `.indexOutOfRange`; `.badFlags` (no flags byte, or bits other than bit 0); for
    /// a raw payload, `.wrongSize` unless it is the chunk's length; for a compressed one,
    /// `.wrongSize` if the first frame's header declares more than the chunk's length, then, as zstd
    /// decodes it with the chunk's length as the output limit, `.corruptCompression` or
    /// `.wrongSize` (past the limit), then `.wrongSize` if it gave fewer bytes; last
    /// `.badHash` unless the chunk's leaf hash is the manifest's.
    public func decode(_ frame: ByteBuffer, index: Int, manifest: ContentManifest) throws(ContentError) -> [UInt8] {
        try withChunk(frame, index: index, manifest: manifest) { Array($0) }
    }

    /// Checks chunk `index` of `manifest`'s content from `frame` as `decode(_:index:manifest:)`
    /// does, then hands its bytes to `body`: a raw chunk's bytes where they arrived, in the
    /// frame, with no copy, a compressed one's as decompressed.
    public func withChunk<R>(
        _ frame: ByteBuffer, index: Int, manifest: ContentManifest, _ body: (UnsafeRawBufferPointer) -> R
    ) throws(ContentError) -> R {
        guard let expected = manifest.descriptor.byteCount(ofChunk: index) else {
            throw ContentError(
                .indexOutOfRange,
                "chunk \(index) is outside content of \(manifest.descriptor.chunkCount) chunks"
            )
        }
        guard let flags = frame.getInteger(at: frame.readerIndex, as: UInt8.self) else {
            throw ContentError(.badFlags, "chunk \(index)'s frame has no flags byte")
        }
        guard flags & ~ChunkFrame.compressedFlag == 0 else {
            throw ContentError(.badFlags, "chunk \(index)'s frame has flags \(flags), not 0 or 1")
        }
        let payload = frame.getSlice(at: frame.readerIndex + ChunkFrame.flagsByteCount, length: frame.readableBytes - 1)
            ?? ByteBuffer()
        if flags & ChunkFrame.compressedFlag == 0 {
            guard payload.readableBytes == expected else {
                throw ContentError(.wrongSize, "chunk \(index) is \(payload.readableBytes) bytes, not \(expected)")
            }
            return try payload.withUnsafeReadableBytes { chunk in
                Result { () throws(ContentError) in try Self.verified(chunk, index: index, manifest: manifest, body) }
            }.get()
        }
        let chunk = try decompress(payload, index: index, expected: expected)
        return try chunk.withUnsafeBytes { chunk in
            Result { () throws(ContentError) in try Self.verified(chunk, index: index, manifest: manifest, body) }
        }.get()
    }

    /// `body(chunk)` if the chunk's leaf hash is the manifest's.
    private static func verified<R>(
        _ chunk: UnsafeRawBufferPointer, index: Int, manifest: ContentManifest, _ body: (UnsafeRawBufferPointer) -> R
    ) throws(ContentError) -> R {
        let hash = ContentTree.leafHash(of: chunk)
        guard hash == manifest.hashes[index] else {
            throw ContentError(.badHash, "chunk \(index) hashes to \(hash.hex), not the manifest's \(manifest.hashes[index].hex)")
        }
        return body(chunk)
    }

    /// The bytes of the chunk `message` carries, checked as `decode(_:index:manifest:)` does
    /// after `.unexpectedContent` unless the message names `manifest`'s root.
    public func decode(_ message: ChunkMessage, manifest: ContentManifest) throws(ContentError) -> [UInt8] {
        try withChunk(message, manifest: manifest) { Array($0) }
    }

    /// `withChunk(_:index:manifest:_:)` for the chunk `message` carries, after
    /// `.unexpectedContent` unless the message names `manifest`'s root.
    public func withChunk<R>(
        _ message: ChunkMessage, manifest: ContentManifest, _ body: (UnsafeRawBufferPointer) -> R
    ) throws(ContentError) -> R {
        guard message.root == manifest.root else {
            throw ContentError(
                .unexpectedContent,
                "a chunk of content \(message.root.hex) is not of the content \(manifest.root.hex)"
            )
        }
        return try withChunk(message.frame, index: Int(message.index), manifest: manifest, body)
    }

    private func decompress(_ payload: ByteBuffer, index: Int, expected: Int) throws(ContentError) -> [UInt8] {
        let result = payload.withUnsafeReadableBytes { raw -> Result<[UInt8], ContentError> in
            // A frame declaring more than the chunk is refused before anything is decoded. (One
            // declaring less may be followed by more frames: decoding tells.)
            if let declared = ZstdFrameHeader.declaredContentSize(raw), declared > UInt64(expected) {
                return .failure(
                    ContentError(.wrongSize, "chunk \(index)'s zstd frame declares \(declared) bytes, more than \(expected)"))
            }
            do throws(WeftCompressionError) {
                return .success(try decompressor.decompress(raw, limit: expected))
            } catch where error == .outputLimitExceeded(expected) {
                return .failure(ContentError(.wrongSize, "chunk \(index) decompresses to more than \(expected) bytes"))
            } catch {
                return .failure(ContentError(.corruptCompression, "chunk \(index): \(error)"))
            }
        }
        let chunk = try result.get()
        guard chunk.count == expected else {
            throw ContentError(.wrongSize, "chunk \(index) decompresses to \(chunk.count) bytes, not \(expected)")
        }
        return chunk
    }
}
