import Testing
import WeftCompression

@Suite("zstd streams (one frame, flushed pieces)")
struct ZstdStreamTests {
    /// Pieces of a connection: each holds a 32-byte key and a 16-byte identifier that come
    /// back in later pieces, around bytes that do not repeat.
    static func pieces(_ count: Int) -> [[UInt8]] {
        let key = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func noise(_ n: Int) -> [UInt8] {
            (0..<n).map { _ in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return UInt8(truncatingIfNeeded: state >> 56)
            }
        }
        let conversation = noise(16)
        return (0..<count).map { index in [0x03] + key + conversation + Array("message \(index)".utf8) + noise(64) }
    }

    @Test("each piece decodes whole as it arrives, and repeats cost less than the first time")
    func roundTrip() throws {
        let compressor = ZstdStreamCompressor(windowLog: 17)
        let decompressor = ZstdStreamDecompressor(maxWindowLog: 17)
        var sizes: [Int] = []
        for piece in Self.pieces(20) {
            let compressed = compressor.compress(piece)
            sizes.append(compressed.count)
            #expect(try decompressor.decompress(compressed, limit: 1 << 20) == piece)
        }
        // The first piece carries the frame header and the key and identifier in full; later
        // ones refer back to them (48 bytes) and keep only the bytes that do not repeat.
        #expect(sizes.dropFirst().allSatisfy { $0 < Self.pieces(1)[0].count - 30 })
        #expect(sizes[0] > sizes[1])
    }

    @Test("a large piece and an empty one")
    func sizes() throws {
        let compressor = ZstdStreamCompressor(windowLog: 17)
        let decompressor = ZstdStreamDecompressor(maxWindowLog: 17)
        let large = ZstdTests.sample(1 << 20)
        let compressed = compressor.compress(large)
        #expect(compressed.count < large.count / 4)
        #expect(try decompressor.decompress(compressed, limit: 1 << 20) == large)
        #expect(try decompressor.decompress(compressor.compress([]), limit: 10).isEmpty)
        #expect(try decompressor.decompress(compressor.compress([7]), limit: 10) == [7])
    }

    @Test("a piece over the limit is refused, even by one byte")
    func limit() throws {
        let compressed = ZstdStreamCompressor(windowLog: 17).compress(ZstdTests.sample(100_000))
        #expect(throws: WeftCompressionError.outputLimitExceeded(99_999)) {
            try ZstdStreamDecompressor(maxWindowLog: 17).decompress(compressed, limit: 99_999)
        }
        #expect(try ZstdStreamDecompressor(maxWindowLog: 17).decompress(compressed, limit: 100_000) == ZstdTests.sample(100_000))
    }

    @Test("a piece cut short is truncated, and the stream stays refused after it")
    func truncated() throws {
        let compressor = ZstdStreamCompressor(windowLog: 17)
        let first = compressor.compress(Self.pieces(1)[0])
        let decompressor = ZstdStreamDecompressor(maxWindowLog: 17)
        #expect(throws: WeftCompressionError.truncated) {
            try decompressor.decompress(Array(first.dropLast(4)), limit: 1 << 20)
        }
        #expect(throws: WeftCompressionError.self) { try decompressor.decompress(first, limit: 1 << 20) }
    }

    @Test("garbage is corrupt")
    func garbage() throws {
        #expect(throws: WeftCompressionError.self) {
            try ZstdStreamDecompressor(maxWindowLog: 17).decompress(Array("not zstd at all".utf8), limit: 1000)
        }
    }

    @Test("a frame asking for a larger window than allowed is refused")
    func window() throws {
        let compressed = ZstdStreamCompressor(windowLog: 20).compress(ZstdTests.sample(1_000))
        #expect(throws: WeftCompressionError.self) {
            try ZstdStreamDecompressor(maxWindowLog: 17).decompress(compressed, limit: 1 << 20)
        }
        #expect(try ZstdStreamDecompressor(maxWindowLog: 20).decompress(compressed, limit: 1 << 20) == ZstdTests.sample(1_000))
    }
}
