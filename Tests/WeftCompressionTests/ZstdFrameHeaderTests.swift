import Testing
import WeftCompression

@Suite("zstd frame headers")
struct ZstdFrameHeaderTests {
    @Test("a frame made by the compressor declares its content size", arguments: [0, 1, 255, 256, 65_791, 1 << 20])
    func declared(size: Int) {
        let frame = ZstdCompressor(level: 1).compress(ZstdTests.sample(size))
        #expect(ZstdFrameHeader.declaredContentSize(frame) == UInt64(size))
        // The header alone is enough; the blocks are not read.
        #expect(ZstdFrameHeader.declaredContentSize(Array(frame.prefix(18))) == UInt64(size))
    }

    @Test("no size: a stream's frame, a skippable frame, a cut header, something else")
    func undeclared() {
        let piece = ZstdStreamCompressor(level: 1, windowLog: 14).compress(ZstdTests.sample(1_000))
        #expect(ZstdFrameHeader.declaredContentSize(piece) == nil)
        // A skippable frame (magic 0x184D2A50) of 4 bytes.
        #expect(ZstdFrameHeader.declaredContentSize([0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4]) == nil)
        #expect(ZstdFrameHeader.declaredContentSize(Array(ZstdFrameHeader.magic)) == nil)
        #expect(ZstdFrameHeader.declaredContentSize([]) == nil)
        #expect(ZstdFrameHeader.declaredContentSize(Array("not zstd at all".utf8)) == nil)
    }
}
