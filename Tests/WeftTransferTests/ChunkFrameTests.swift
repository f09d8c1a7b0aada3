import NIOCore
import Testing
import WeftCompression
import WeftModel
import WeftTransfer

@Suite("Chunk frames and messages (SPEC.md §17.5, §17.6)")
struct ChunkFrameTests {
    /// Text content of three chunks (the last 1,000 bytes) and its manifest.
    static func sample() throws -> (content: [UInt8], manifest: ContentManifest) {
        let content = ContentSample.text.bytes(2 * 16_384 + 1_000)
        return (content, try ContentManifestBuilder.manifest(of: content))
    }

    static func chunk(_ index: Int, of content: [UInt8]) -> [UInt8] {
        Array(content[(index * 16_384)..<min((index + 1) * 16_384, content.count)])
    }

    static func frame(compressed payload: [UInt8]) -> ByteBuffer {
        ByteBuffer(bytes: [ChunkFrame.compressedFlag] + payload)
    }

    static func reason(_ frame: ByteBuffer, index: Int, _ manifest: ContentManifest) -> ContentError.Reason? {
        do {
            _ = try ChunkFrameDecoder().decode(frame, index: index, manifest: manifest)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test("a zstd frame that declares more than the chunk is refused before decoding; one that declares less, after")
    func declaredTooLarge() throws {
        let (content, manifest) = try Self.sample()
        let zstd = ZstdCompressor(level: 1)
        // A bomb: 16 MiB of zeros declared in a few hundred bytes.
        let bomb = zstd.compress([UInt8](repeating: 0, count: 16 << 20))
        #expect(bomb.count < 4 << 10)
        #expect(Self.reason(Self.frame(compressed: bomb), index: 0, manifest) == .wrongSize)
        let oneMore = zstd.compress(Self.chunk(0, of: content) + [0])
        #expect(Self.reason(Self.frame(compressed: oneMore), index: 0, manifest) == .wrongSize)
        let oneLess = zstd.compress(Array(Self.chunk(0, of: content).dropLast()))
        #expect(Self.reason(Self.frame(compressed: oneLess), index: 0, manifest) == .wrongSize)
    }

    @Test("zstd data that declares no size and expands past the chunk is refused at the chunk's length")
    func undeclaredExpansion() throws {
        let (content, manifest) = try Self.sample()
        // A stream's piece: one frame with no content size and a 2^14 window, 4 MiB of zeros.
        let piece = ZstdStreamCompressor(level: 1, windowLog: 14).compress([UInt8](repeating: 0, count: 4 << 20))
        #expect(ZstdFrameHeader.declaredContentSize(piece) == nil)
        #expect(Self.reason(Self.frame(compressed: piece), index: 0, manifest) == .wrongSize)
        // The chunk's own frame and a second frame after it.
        let zstd = ZstdCompressor(level: 1)
        let twoFrames = zstd.compress(Self.chunk(2, of: content)) + zstd.compress([0x20])
        #expect(Self.reason(Self.frame(compressed: twoFrames), index: 2, manifest) == .wrongSize)
        // The chunk in two frames is the chunk.
        let chunk = Self.chunk(2, of: content)
        let split = zstd.compress(Array(chunk.prefix(10))) + zstd.compress(Array(chunk.dropFirst(10)))
        #expect(try ChunkFrameDecoder().decode(Self.frame(compressed: split), index: 2, manifest: manifest) == chunk)
    }

    @Test("checks come in order: index, flags, size, hash")
    func order() throws {
        let (content, manifest) = try Self.sample()
        let chunk0 = Self.chunk(0, of: content)
        #expect(Self.reason(ByteBuffer(bytes: [0x02]), index: 3, manifest) == .indexOutOfRange)
        #expect(Self.reason(ByteBuffer(bytes: [0x02]), index: -1, manifest) == .indexOutOfRange)
        #expect(Self.reason(ByteBuffer(), index: 0, manifest) == .badFlags)
        for flags: UInt8 in [0x02, 0x04, 0x80, 0xff, 0x03] {
            #expect(Self.reason(ByteBuffer(bytes: [flags] + chunk0), index: 0, manifest) == .badFlags)
        }
        #expect(Self.reason(ByteBuffer(bytes: [0] + chunk0), index: 1, manifest) == .badHash)
        #expect(Self.reason(ByteBuffer(bytes: [0] + chunk0), index: 2, manifest) == .wrongSize)
        var flipped = chunk0
        flipped[5] ^= 1
        #expect(Self.reason(ByteBuffer(bytes: [0] + flipped), index: 0, manifest) == .badHash)
        #expect(Self.reason(Self.frame(compressed: [0x28, 0xb5, 0x2f, 0xfd]), index: 0, manifest) == .corruptCompression)
        #expect(Self.reason(Self.frame(compressed: Array(chunk0.prefix(100))), index: 0, manifest) == .corruptCompression)
    }

    @Test("the frame is read from its reader index, as a slice of a larger buffer")
    func sliced() throws {
        let (content, manifest) = try Self.sample()
        var buffer = ByteBuffer(bytes: [9, 9, 9])
        let frame = ChunkFrameEncoder().encode(Self.chunk(1, of: content), mimeType: "text/plain")
        buffer.writeImmutableBuffer(frame)
        buffer.moveReaderIndex(forwardBy: 3)
        #expect(try ChunkFrameDecoder().decode(buffer, index: 1, manifest: manifest) == Self.chunk(1, of: content))
    }

    @Test("compression is kept only when it saves 3 % or more")
    func savingThreshold() throws {
        let encoder = ChunkFrameEncoder()
        // Random bytes with every 20th a repeat of the one before: zstd saves a little.
        var random = ContentSample.random.bytes(16_384)
        for index in stride(from: 1, to: random.count, by: 20) { random[index] = random[index - 1] }
        let compressed = ZstdCompressor(level: ChunkFrame.compressionLevel).compress(random)
        let frame = encoder.encode(random, mimeType: "application/octet-stream")
        let kept = frame.getInteger(at: 0, as: UInt8.self) == ChunkFrame.compressedFlag
        #expect(kept == (compressed.count * 100 <= random.count * 97))
        #expect(frame.readableBytes <= random.count + 1)
    }

    static let mediaTypeExamples: [(String, Bool)] = [
        ("image/png", true), ("image/jpeg", true), ("IMAGE/WebP; q=1", true), ("video/mp4", true), ("audio/ogg", true),
        ("application/zip", true), ("application/gzip", true), ("application/zstd", true), ("application/x-7z-compressed", true),
        ("image/svg+xml", false), ("image/bmp", false), ("audio/wav", false), ("text/plain", false),
        ("application/json", false), ("application/octet-stream", false), ("imagex/png", false), ("nonsense", false),
        (" application/zip ; x=y", true),
    ]

    @Test("MIME types of compressed content go raw", arguments: mediaTypeExamples)
    func mediaTypes(mimeType: String, compressed: Bool) {
        #expect(CompressedMediaTypes.contains(mimeType) == compressed)
        let frame = ChunkFrameEncoder().encode(ContentSample.text.bytes(16_384), mimeType: mimeType)
        #expect((frame.getInteger(at: 0, as: UInt8.self) == 0) == compressed)
    }

    @Test("a chunk message round-trips; every prefix shorter than 37 bytes is refused")
    func message() throws {
        let (content, manifest) = try Self.sample()
        let frame = ChunkFrameEncoder().encode(Self.chunk(2, of: content), mimeType: "text/plain")
        let message = ChunkMessage(root: manifest.root, index: 2, frame: frame)
        let wire = Array(message.wire.readableBytesView)
        #expect(wire.count == 36 + frame.readableBytes)
        #expect(Array(wire[0..<32]) == manifest.root.bytes)
        #expect(Array(wire[32..<36]) == [0, 0, 0, 2])
        #expect(try ChunkMessage(wire: ByteBuffer(bytes: wire)) == message)
        for length in 0..<ChunkMessage.minimumByteCount {
            let error = #expect(throws: ContentError.self) { try ChunkMessage(wire: ByteBuffer(bytes: wire[0..<length])) }
            #expect(error?.reason == .malformedChunkMessage)
        }
        let other = try ContentManifestBuilder.manifest(of: [1, 2, 3])
        let error = #expect(throws: ContentError.self) { try ChunkFrameDecoder().decode(message, manifest: other) }
        #expect(error?.reason == .unexpectedContent)
    }

    @Test("one decoder, reused across chunks after a refusal, still decodes")
    func reuseAfterError() throws {
        let (content, manifest) = try Self.sample()
        let encoder = ChunkFrameEncoder()
        let decoder = ChunkFrameDecoder()
        let corrupt = Self.frame(compressed: Array(ZstdCompressor().compress(Self.chunk(0, of: content)).dropLast(3)))
        #expect(throws: ContentError.self) { try decoder.decode(corrupt, index: 0, manifest: manifest) }
        for index in 0..<3 {
            let frame = encoder.encode(Self.chunk(index, of: content), mimeType: "text/plain")
            #expect(try decoder.decode(frame, index: index, manifest: manifest) == Self.chunk(index, of: content))
        }
    }
}
