import NIOCore
import Testing
import WeftCrypto
import WeftModel
import WeftTransfer

/// Content for the tests: text-like (compresses) or random (does not), drawn from a seed.
enum ContentSample: String, CaseIterable, Sendable {
    case text
    case random

    func bytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        switch self {
        case .random:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(count + 8)
            while bytes.count < count {
                withUnsafeBytes(of: generator.next()) { bytes.append(contentsOf: $0) }
            }
            return Array(bytes.prefix(count))
        case .text:
            let words = ["weft", "mesh", "chunk", "the", "of", "a", "message", "node", "peer", "content", "sync"]
            var bytes: [UInt8] = []
            bytes.reserveCapacity(count + 16)
            while bytes.count < count {
                let draw = generator.next()
                bytes.append(contentsOf: words[Int(draw % UInt64(words.count))].utf8)
                bytes.append(draw % 13 == 0 ? UInt8(ascii: "\n") : UInt8(ascii: " "))
            }
            return Array(bytes.prefix(count))
        }
    }

    var mimeType: String { self == .text ? "text/plain; charset=utf-8" : "application/octet-stream" }
}

@Suite("Rich content round trips (SPEC.md §17)")
struct ContentRoundTripTests {
    /// 1 byte; 2 KB + 1; exactly one chunk; several chunks, the last short; a whole number of
    /// chunks; many chunks of 2^16 with a short last one; content over 2 MiB (256 KiB chunks).
    static let sizes = [1, 2_049, 16_384, 5 * 16_384 + 7, 4 * 16_384, 1_000_000 + 12_345, 2 * 1_048_576 + 1]

    @Test("sender to receiver through the wire forms, chunk by chunk", arguments: ContentSample.allCases, sizes)
    func roundTrip(sample: ContentSample, size: Int) throws {
        let content = sample.bytes(size)

        // Sender: hash chunk by chunk, then frame each chunk as a message.
        var builder = try ContentManifestBuilder(byteCount: UInt64(size))
        var offset = 0
        while let length = builder.nextChunkByteCount {
            try builder.append(Array(content[offset..<(offset + length)]))
            offset += length
        }
        let manifest = try builder.finish()
        #expect(manifest == (try ContentManifestBuilder.manifest(of: content)))
        #expect(manifest.descriptor.byteCount == UInt64(size))
        #expect(manifest.descriptor.chunkLog == (try ContentChunking.chunkLog(forByteCount: UInt64(size))))
        let encoder = ChunkFrameEncoder()
        var messages: [ByteBuffer] = []
        var compressedCount = 0
        for index in 0..<manifest.descriptor.chunkCount {
            let start = Int(manifest.descriptor.offset(ofChunk: index)!)
            let chunk = Array(content[start..<(start + manifest.descriptor.byteCount(ofChunk: index)!)])
            let frame = encoder.encode(chunk, mimeType: sample.mimeType)
            if frame.getInteger(at: 0, as: UInt8.self) == ChunkFrame.compressedFlag { compressedCount += 1 }
            messages.append(ChunkMessage(root: manifest.root, index: UInt32(index), frame: frame).wire)
        }
        switch sample {
        case .random: #expect(compressedCount == 0)  // zstd cannot save 3 % of random bytes
        case .text:
            // Every chunk but a last one too short to gain from zstd.
            let lastIsShort = manifest.descriptor.byteCount(ofChunk: manifest.descriptor.chunkCount - 1)! < 256
            #expect(compressedCount == manifest.descriptor.chunkCount - (lastIsShort ? 1 : 0))
        }

        // Receiver: the manifest from its bytes, then the chunks in reverse order.
        let received = try ContentManifest(wire: manifest.wire)
        #expect(received == manifest)
        let decoder = ChunkFrameDecoder()
        var chunks: [Int: [UInt8]] = [:]
        for wire in messages.reversed() {
            let message = try ChunkMessage(wire: wire)
            chunks[Int(message.index)] = try decoder.decode(message, manifest: received)
        }
        #expect(chunks.count == received.descriptor.chunkCount)
        #expect((0..<chunks.count).flatMap { chunks[$0]! } == content)
    }

    @Test("one byte of text goes raw: a zstd frame is longer than the byte")
    func oneByte() throws {
        let manifest = try ContentManifestBuilder.manifest(of: [0x41])
        #expect(manifest.descriptor.chunkCount == 1)
        #expect(manifest.root.bytes == ContentTree.leafHash(of: [0x41]).bytes)
        let frame = ChunkFrameEncoder().encode([0x41], mimeType: "text/plain")
        #expect(Array(frame.readableBytesView) == [0x00, 0x41])
    }

    @Test("the streaming builder refuses a chunk of the wrong length, one too many, and finishing early")
    func builderMisuse() throws {
        var builder = try ContentManifestBuilder(byteCount: 16_384 + 10)
        #expect(builder.chunkByteCount == 16_384)
        #expect(builder.nextChunkByteCount == 16_384)
        #expect((try? builder.finish()) == nil)
        let short = #expect(throws: ContentError.self) { try builder.append([UInt8](repeating: 1, count: 16_383)) }
        #expect(short?.reason == .wrongSize)
        #expect(builder.nextChunkIndex == 0)
        try builder.append([UInt8](repeating: 1, count: 16_384))
        #expect(builder.nextChunkByteCount == 10)
        #expect(throws: ContentError.self) { try builder.append([UInt8](repeating: 1, count: 16_384)) }
        try builder.append([UInt8](repeating: 1, count: 10))
        #expect(builder.nextChunkByteCount == nil)
        let extra = #expect(throws: ContentError.self) { try builder.append([1]) }
        #expect(extra?.reason == .wrongSize)
        #expect(try builder.finish().descriptor.chunkCount == 2)
    }

    @Test("empty content and content past 8 GiB cannot be described")
    func unsupportedSizes() {
        for size in [UInt64(0), ContentDescriptor.maxByteCount + 1, UInt64.max] {
            let error = #expect(throws: ContentError.self) { try ContentManifestBuilder(byteCount: size) }
            #expect(error?.reason == .unsupportedSize)
        }
        #expect(throws: ContentError.self) { try ContentManifestBuilder.manifest(of: []) }
    }

    @Test("the chunking rule: few chunks for small content, 256 KiB chunks past 2 MiB, 512 KiB past 4 MiB")
    func chunkingRule() throws {
        // Every size where the rule changes, and either side of it.
        let expectations: [(UInt64, UInt8)] = [
            (1, 14), (1 << 18, 14), ((1 << 18) + 1, 15), (1 << 19, 15), ((1 << 19) + 1, 16), (1 << 20, 16),
            ((1 << 20) + 1, 17), (1 << 21, 17), ((1 << 21) + 1, 18), (1 << 22, 18), ((1 << 22) + 1, 19),
            (1 << 23, 19), (1 << 32, 19), ((1 << 32) + 1, 19), (1 << 33, 19),
        ]
        for (size, chunkLog) in expectations {
            #expect(try ContentChunking.chunkLog(forByteCount: size) == chunkLog, "\(size) bytes")
        }
        // Below 4 MiB at most 16 chunks; never more than the maximum.
        for size in stride(from: UInt64(1), through: 1 << 22, by: 4_099) {
            let builder = try ContentManifestBuilder(byteCount: size)
            #expect(builder.chunkCount <= ContentChunking.smallContentChunkCount)
        }
    }
}
