import NIOCore
import Testing
import WeftBytes

/// WeftBytes' rules for every read: nil on short input, a throw on a malformed field, and in
/// both cases the reader index where it was; every write returns the bytes it wrote.
@Suite("WeftBytes: length-prefixed fields")
struct ByteBufferFieldTests {
    /// A buffer whose reader index is not zero, as in a real connection.
    private func buffer(_ bytes: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer(bytes: [0xee] + bytes)
        buffer.moveReaderIndex(forwardBy: 1)
        return buffer
    }

    @Test("u8, u16 and u32 prefixes round trip bytes, text and slices")
    func roundTrip() throws {
        var buffer = ByteBuffer()
        #expect(buffer.writeLengthPrefixedBytes([1, 2, 3], UInt8.self) == 4)
        #expect(buffer.writeLengthPrefixedText("Zoë 🧵", UInt16.self) == 2 + 9)
        #expect(buffer.writeLengthPrefixedBytes([UInt8](repeating: 7, count: 300), UInt32.self) == 304)
        #expect(buffer.writeLengthPrefixed(UInt16.self) { $0.writeInteger(UInt64(5)) } == 10)
        #expect(buffer.readableBytesView.prefix(6) == [3, 1, 2, 3, 0, 9])

        #expect(try buffer.readLengthPrefixedBytes(UInt8.self, limit: 3) == [1, 2, 3])
        #expect(try buffer.readLengthPrefixedText(UInt16.self, limit: 9) == "Zoë 🧵")
        #expect(try buffer.readLengthPrefixedSlice(UInt32.self, limit: 300)?.readableBytes == 300)
        var nested = try #require(try buffer.readLengthPrefixedSlice(UInt16.self, limit: 8))
        #expect(nested.readInteger(as: UInt64.self) == 5)
        #expect(buffer.readableBytes == 0)
    }

    @Test("every truncation returns nil and leaves the reader index alone")
    func truncation() throws {
        var whole = ByteBuffer()
        whole.writeLengthPrefixedText("hello, weft", UInt16.self)
        let bytes = Array(whole.readableBytesView)
        for length in 0..<bytes.count {
            var short = buffer(Array(bytes.prefix(length)))
            #expect(try short.readLengthPrefixedText(UInt16.self, limit: 100) == nil, "\(length) bytes")
            #expect(try short.readLengthPrefixedBytes(UInt16.self, limit: 100) == nil, "\(length) bytes")
            #expect(try short.readLengthPrefixedSlice(UInt16.self, limit: 100) == nil, "\(length) bytes")
            #expect(short.readerIndex == 1)
        }
    }

    @Test("fed one byte at a time, a field reads only once complete")
    func byteAtATime() throws {
        var whole = ByteBuffer()
        whole.writeLengthPrefixedBytes([9, 8, 7, 6], UInt32.self)
        var incoming = buffer([])
        for (index, byte) in whole.readableBytesView.enumerated() {
            incoming.writeInteger(byte)
            let field = try incoming.readLengthPrefixedBytes(UInt32.self, limit: 4)
            #expect(field == (index == 7 ? [9, 8, 7, 6] : nil), "after \(index + 1) bytes")
        }
        #expect(incoming.readableBytes == 0)
    }

    @Test("a prefix over the limit throws tooLong from the prefix alone, consuming nothing")
    func overLimit() {
        var buffer = buffer([0, 0, 0x10, 0])  // a u32 length of 4096, and no body
        #expect(throws: ByteFieldError.tooLong(length: 4096, limit: 4095)) {
            try buffer.readLengthPrefixedSlice(UInt32.self, limit: 4095)
        }
        #expect(throws: ByteFieldError.tooLong(length: 4096, limit: 100)) {
            try buffer.readLengthPrefixedText(UInt32.self, limit: 100)
        }
        #expect(throws: ByteFieldError.tooLong(length: 4096, limit: 0)) {
            try buffer.readLengthPrefixedBytes(UInt32.self, limit: 0)
        }
        #expect(buffer.readerIndex == 1)
    }

    @Test("invalid UTF-8 throws invalidUTF8 and consumes nothing",
          arguments: [[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0x61, 0xe2, 0x82]] as [[UInt8]])
    func invalidText(text: [UInt8]) throws {
        var buffer = buffer([UInt8(text.count)] + text)
        #expect(throws: ByteFieldError.invalidUTF8) { try buffer.readLengthPrefixedText(UInt8.self, limit: 10) }
        #expect(throws: ByteFieldError.invalidUTF8) { try buffer.readText(length: text.count + 1) }
        #expect(buffer.readerIndex == 1)
        // The same bytes read fine as bytes.
        #expect(try buffer.readLengthPrefixedBytes(UInt8.self, limit: 10) == text)
    }

    @Test("readText reads exactly its length, or nil if short")
    func text() throws {
        var buffer = buffer(Array("weft!".utf8))
        #expect(try buffer.readText(length: 6) == nil)
        #expect(try buffer.readText(length: 4) == "weft")
        #expect(try buffer.readText(length: 0) == "")
        #expect(try buffer.readText(length: 1) == "!")
    }

    @Test("rewindingReaderIndexOnNil undoes a partial composite read on nil and on a throw")
    func rewinding() throws {
        struct Refused: Error {}
        var buffer = buffer([0, 1, 0, 2, 0xff])
        let none: Int? = buffer.rewindingReaderIndexOnNil { b in
            _ = b.readInteger(as: UInt16.self)
            return b.readInteger(as: UInt32.self).map(Int.init)
        }
        #expect(none == nil)
        #expect(buffer.readerIndex == 1)
        #expect(throws: Refused.self) {
            try buffer.rewindingReaderIndexOnNil { (b: inout ByteBuffer) throws(Refused) -> Int? in
                _ = b.readInteger(as: UInt16.self)
                throw Refused()
            }
        }
        #expect(buffer.readerIndex == 1)
        let pair = buffer.rewindingReaderIndexOnNil { b -> (UInt16, UInt16)? in
            guard let first = b.readInteger(as: UInt16.self), let second = b.readInteger(as: UInt16.self) else { return nil }
            return (first, second)
        }
        #expect(pair.map { [$0.0, $0.1] } == [1, 2])
        #expect(buffer.readableBytes == 1)
    }
}
