import NIOCore
import Testing
@testable import WeftWire

@Suite("Preamble")
struct PreambleTests {
    @Test("the default preamble is WEFT, version 1, reserved 0")
    func bytes() {
        #expect(Preamble().bytes == Array("WEFT".utf8) + [0, 1, 0, 0])
        #expect(Preamble(version: 0x0203, reserved: 0x0405).bytes == Array("WEFT".utf8) + [2, 3, 4, 5])
    }

    @Test("round trip", arguments: [Preamble(), Preamble(version: 2), Preamble(version: .max, reserved: .max)])
    func roundTrip(preamble: Preamble) throws {
        var buffer = ByteBuffer()
        #expect(preamble.write(to: &buffer) == WireConstants.preambleByteCount)
        buffer.writeBytes([0xaa, 0xbb])  // whatever follows is left alone
        #expect(try Preamble.read(from: &buffer) == preamble)
        #expect(buffer.bytes == [0xaa, 0xbb])
    }

    @Test("every prefix returns nil without moving the reader index")
    func truncated() throws {
        let bytes = Preamble().bytes
        for length in 0..<bytes.count {
            var buffer = ByteBuffer(bytes: bytes.prefix(length))
            buffer.moveReaderIndex(forwardBy: 0)
            let readerIndex = buffer.readerIndex
            #expect(try Preamble.read(from: &buffer) == nil, "\(length) bytes")
            #expect(buffer.readerIndex == readerIndex)
            #expect(buffer.readableBytes == length)
        }
    }

    @Test("read byte at a time: nil until the eighth byte")
    func byteAtATime() throws {
        var buffer = ByteBuffer(bytes: [0x99])
        buffer.moveReaderIndex(forwardBy: 1)  // a reader index that is not zero
        for (index, byte) in Preamble(version: 7).bytes.enumerated() {
            buffer.writeInteger(byte)
            let result = try Preamble.read(from: &buffer)
            if index < 7 {
                #expect(result == nil)
                #expect(buffer.readableBytes == index + 1)
            } else {
                #expect(result == Preamble(version: 7))
                #expect(buffer.readableBytes == 0)
            }
        }
    }

    @Test("a wrong magic throws malformed", arguments: ["WEFU", "weft", "GET ", "\0\0\0\0", "SSH-"])
    func wrongMagic(magic: String) {
        var buffer = ByteBuffer(bytes: Array(magic.utf8) + [0, 1, 0, 0])
        do throws(WeftWireError) {
            _ = try Preamble.read(from: &buffer)
            Issue.record("\(magic) accepted")
        } catch {
            #expect(error.code == .malformedFrame)
            #expect(error.description.contains("magic"))
        }
        #expect(buffer.readerIndex == 0)
    }
}
