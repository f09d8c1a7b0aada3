import NIOCore
import Testing
import WeftModel

@Suite("Content descriptors (SPEC.md §17.1)")
struct ContentDescriptorTests {
    static let root = ContentRoot(bytes: Array(0..<32))!

    @Test("a descriptor round-trips through its 41 bytes, fields at their offsets")
    func roundTrip() throws {
        let descriptor = try ContentDescriptor(byteCount: 70_000, chunkLog: 14, root: Self.root)
        let encoding = descriptor.encoding
        #expect(encoding.count == ContentDescriptor.encodedByteCount)
        #expect(encoding[0..<8] == [0, 0, 0, 0, 0, 0x01, 0x11, 0x70])
        #expect(encoding[8] == 14)
        #expect(Array(encoding[9...]) == Self.root.bytes)
        #expect(try ContentDescriptor(encoding: encoding) == descriptor)
        #expect(descriptor.chunkCount == 5)
        #expect(descriptor.chunkByteCount == 16_384)
        #expect(descriptor.byteCount(ofChunk: 0) == 16_384)
        #expect(descriptor.byteCount(ofChunk: 4) == 70_000 - 4 * 16_384)
        #expect(descriptor.byteCount(ofChunk: 5) == nil)
        #expect(descriptor.byteCount(ofChunk: -1) == nil)
        #expect(descriptor.offset(ofChunk: 4) == 4 * 16_384)
    }

    @Test("reading from a buffer consumes exactly the descriptor and leaves what follows")
    func readingLeavesTheRest() throws {
        let descriptor = try ContentDescriptor(byteCount: 1, chunkLog: 19, root: Self.root)
        var buffer = ByteBuffer()
        #expect(descriptor.write(to: &buffer) == 41)
        buffer.writeBytes([0xaa, 0xbb])
        #expect(try ContentDescriptor(reading: &buffer) == descriptor)
        #expect(Array(buffer.readableBytesView) == [0xaa, 0xbb])
    }

    @Test("every prefix of a descriptor is refused, and the reader index stays")
    func truncated() throws {
        let encoding = try ContentDescriptor(byteCount: 123_456, chunkLog: 15, root: Self.root).encoding
        for length in 0..<encoding.count {
            var buffer = ByteBuffer(bytes: encoding[0..<length])
            let error = #expect(throws: ContentError.self) { try ContentDescriptor(reading: &buffer) }
            #expect(error?.reason == .malformedDescriptor)
            #expect(buffer.readerIndex == 0)
            #expect(throws: ContentError.self) { try ContentDescriptor(encoding: Array(encoding[0..<length])) }
        }
        #expect(throws: ContentError.self) { try ContentDescriptor(encoding: encoding + [0]) }
    }

    static let outOfBoundsFields: [(UInt64, UInt8)] = [
        (0, 14), (1, 13), (1, 20), (1, 0), (1, 255), ((1 << 32) + 1, 18), ((1 << 33) + 1, 19), (UInt64.max, 19),
    ]

    @Test("bounds: size at least 1, chunkLog 14...19, at most 16,384 chunks", arguments: outOfBoundsFields)
    func outOfBounds(byteCount: UInt64, chunkLog: UInt8) throws {
        let error = #expect(throws: ContentError.self) {
            try ContentDescriptor(byteCount: byteCount, chunkLog: chunkLog, root: Self.root)
        }
        #expect(error?.reason == .malformedDescriptor)
        // The same fields as bytes, read.
        var bytes = ByteBuffer()
        bytes.writeInteger(byteCount)
        bytes.writeInteger(chunkLog)
        bytes.writeBytes(Self.root.bytes)
        #expect(throws: ContentError.self) { try ContentDescriptor(encoding: Array(bytes.readableBytesView)) }
    }

    @Test("the largest content and the edges of the range are accepted")
    func edges() throws {
        let largest = try ContentDescriptor(byteCount: ContentDescriptor.maxByteCount, chunkLog: 19, root: Self.root)
        #expect(largest.chunkCount == ContentDescriptor.maxChunkCount)
        #expect(ContentDescriptor.maxByteCount == 1 << 33)
        #expect(try ContentDescriptor(byteCount: 1 << 32, chunkLog: 18, root: Self.root).chunkCount == 16_384)
        #expect(try ContentDescriptor(byteCount: 1, chunkLog: 14, root: Self.root).chunkCount == 1)
        #expect(try ContentDescriptor(byteCount: 16_384, chunkLog: 14, root: Self.root).chunkCount == 1)
        #expect(try ContentDescriptor(byteCount: 16_385, chunkLog: 14, root: Self.root).byteCount(ofChunk: 1) == 1)
    }

    @Test("a root is exactly 32 bytes and shows as 64 hex digits")
    func root() {
        #expect(ContentRoot(bytes: Array(repeating: 0, count: 31)) == nil)
        #expect(ContentRoot(bytes: Array(repeating: 0, count: 33)) == nil)
        #expect(Self.root.description == "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        #expect(Set([Self.root, ContentRoot(bytes: Array(0..<32))!]).count == 1)
    }
}
