import Testing
import WeftCompression

@Suite("zstd contexts")
struct ZstdTests {
    /// Compressible but not trivial: a repeating text with a counter.
    static func sample(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var i = 0
        while bytes.count < count {
            bytes += Array("message part \(i) of a rich content upload\n".utf8)
            i += 1
        }
        return Array(bytes.prefix(count))
    }

    @Test("round trip at several sizes, reusing one context", arguments: [0, 1, 100, 4096, 200_000, 1 << 20])
    func roundTrip(size: Int) throws {
        let compressor = ZstdCompressor()
        let decompressor = ZstdDecompressor()
        for _ in 0..<2 {
            let input = Self.sample(size)
            let compressed = compressor.compress(input)
            if size >= 4096 { #expect(compressed.count < input.count / 4) }
            #expect(try decompressor.decompress(compressed, limit: size) == input)
        }
    }

    @Test("output over the limit is refused, even by one byte")
    func limit() throws {
        let input = Self.sample(100_000)
        let compressed = ZstdCompressor().compress(input)
        #expect(throws: WeftCompressionError.outputLimitExceeded(99_999)) {
            try ZstdDecompressor().decompress(compressed, limit: 99_999)
        }
    }

    @Test("concatenated frames decode whole: the first one's declared size does not end the output, and the limit still holds")
    func concatenated() throws {
        let first = Self.sample(70_000), second = Array(Self.sample(90_000).reversed())
        let compressor = ZstdCompressor()
        let both = compressor.compress(first) + compressor.compress(second)
        let decompressor = ZstdDecompressor()
        #expect(try decompressor.decompress(both, limit: 160_000) == first + second)
        #expect(throws: WeftCompressionError.outputLimitExceeded(159_999)) {
            try decompressor.decompress(both, limit: 159_999)
        }
        // Cut inside the second frame: what the first declared is not taken for the end.
        #expect(throws: WeftCompressionError.truncated) { try decompressor.decompress(Array(both.dropLast(10)), limit: 160_000) }
    }

    @Test("a zip bomb is stopped at the limit without allocating its declared size")
    func bomb() throws {
        let huge = [UInt8](repeating: 0, count: 64 << 20)
        let compressed = ZstdCompressor(level: 1).compress(huge)
        #expect(compressed.count < 64 << 10)
        #expect(throws: WeftCompressionError.outputLimitExceeded(1 << 20)) {
            try ZstdDecompressor().decompress(compressed, limit: 1 << 20)
        }
    }

    @Test("garbage is corrupt, a cut frame is truncated")
    func badInput() throws {
        #expect(throws: WeftCompressionError.self) {
            try ZstdDecompressor().decompress(Array("not zstd at all".utf8), limit: 1000)
        }
        let compressed = ZstdCompressor().compress(Self.sample(10_000))
        #expect(throws: WeftCompressionError.truncated) {
            try ZstdDecompressor().decompress(Array(compressed.dropLast(5)), limit: 10_000)
        }
        // The same context still works after errors.
        let decompressor = ZstdDecompressor()
        _ = try? decompressor.decompress(Array(compressed.dropLast(5)), limit: 10_000)
        #expect(try decompressor.decompress(compressed, limit: 10_000) == Self.sample(10_000))
    }

    @Test("a frame whose header asks for a window larger than the output limit is refused before the window is allocated")
    func windowBomb() throws {
        // A frame with a 128 MiB window and no content size: zstd would allocate the window
        // to decode even these 100 bytes.
        let piece = ZstdStreamCompressor(level: 1, windowLog: 27).compress(Self.sample(100))
        let error = #expect(throws: WeftCompressionError.self) {
            try ZstdDecompressor().decompress(piece, limit: 1 << 20)
        }
        #expect(error?.description.contains("corrupt") == true, "refused for its window, not cut short: \(String(describing: error))")
        // A window the limit allows still decodes (the piece is a flushed, unended frame).
        let small = ZstdStreamCompressor(level: 1, windowLog: 17).compress(Self.sample(100))
        #expect(throws: WeftCompressionError.truncated) { try ZstdDecompressor().decompress(small, limit: 1 << 20) }
    }
}
