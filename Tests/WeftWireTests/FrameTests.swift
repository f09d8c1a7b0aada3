import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

@Suite("Frame")
struct FrameTests {
    static let samples: [Frame] = [
        .ping(0),
        .ping(.max),
        .pong(0x0102_0304_0506_0708),
        .close(.normal, ""),
        .close(.idleTimeout, "nothing received for 60 s"),
        .close(CloseCode(rawValue: 999), "ünï 🧵"),
        .error(.decryptionFailed, "a transport record failed authentication"),
        .error(ErrorCode(rawValue: 0xffff), ""),
        .rekey,
        .data(ByteBuffer()),
        .data(ByteBuffer(bytes: [0])),
        .data(ByteBuffer(bytes: (0..<5000).map { UInt8(truncatingIfNeeded: $0) })),
    ]

    /// Bytes before which a frame of this type cannot be complete.
    static func minimumByteCount(_ type: Frame.FrameType) -> Int {
        switch type {
        case .ping, .pong: 10
        case .close, .error: 4
        case .rekey, .data: 2
        }
    }

    static func encode(_ frame: Frame) -> [UInt8] {
        var buffer = ByteBuffer()
        frame.write(to: &buffer)
        return buffer.bytes
    }

    private func expectError(
        _ bytes: [UInt8], _ code: ErrorCode, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do throws(WeftWireError) {
            let frame = try Frame.read(from: ByteBuffer(bytes: bytes))
            Issue.record("\(Array(bytes.prefix(16)).hex) parsed as \(frame)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == code, "\(error) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Every frame type

    @Test("round trip", arguments: samples)
    func roundTrip(frame: Frame) throws {
        var buffer = ByteBuffer()
        let written = frame.write(to: &buffer)
        #expect(written == frame.encodedByteCount)
        #expect(buffer.readableBytes == written)
        #expect(buffer.getInteger(at: 0, as: UInt8.self) == frame.type.rawValue)
        #expect(buffer.getInteger(at: 1, as: UInt8.self) == 0, "flags are zero")
        #expect(try Frame.read(from: buffer) == frame)
    }

    @Test("a frame cut short of its fixed part throws malformed", arguments: samples)
    func truncated(frame: Frame) {
        let bytes = Self.encode(frame)
        for length in 0..<Self.minimumByteCount(frame.type) {
            expectError(Array(bytes.prefix(length)), .malformedFrame, "\(length) bytes")
        }
    }

    @Test("error texts name each frame type with its article")
    func articles() {
        // An ERROR frame of one byte is cut inside its code: "an error frame", never "a error frame".
        for (type, expected) in [(Frame.FrameType.error, "an error frame"), (.close, "a close frame"), (.ping, "a ping frame")] {
            do throws(WeftWireError) {
                _ = try Frame.read(from: ByteBuffer(bytes: [type.rawValue, 0, 1]))
                Issue.record("a truncated \(type) frame parsed")
            } catch {
                #expect(error.description.contains(expected), "\(error)")
            }
        }
    }

    @Test("a sealed record: every prefix needs more bytes and consumes nothing", arguments: samples)
    func truncatedRecord(frame: Frame) throws {
        var (sender, receiver) = TransportCodec.pair()
        var record = ByteBuffer()
        try sender.seal(frame, into: &record)
        #expect(record.readableBytes == 4 + frame.encodedByteCount + 16)
        #expect(record.getInteger(at: 0, as: UInt32.self) == UInt32(frame.encodedByteCount + 16))
        let bytes = record.bytes
        for length in 0..<bytes.count {
            var partial = ByteBuffer(bytes: bytes.prefix(length))
            #expect(try receiver.open(from: &partial) == nil, "\(length) of \(bytes.count) bytes")
            #expect(partial.readerIndex == 0)
            #expect(partial.readableBytes == length)
        }
        var whole = ByteBuffer(bytes: bytes)
        #expect(try receiver.open(from: &whole) == frame)
    }

    @Test("a record fed byte at a time: nil until complete, then exactly the frame", arguments: samples)
    func byteAtATime(frame: Frame) throws {
        var (sender, receiver) = TransportCodec.pair()
        var record = ByteBuffer()
        try sender.seal(frame, into: &record)
        if case .rekey = frame { sender.rekeySending() }
        try sender.seal(.ping(77), into: &record)  // a second record right behind it

        var input = ByteBuffer()
        var opened: [Frame] = []
        for byte in record.readableBytesView {
            input.writeInteger(byte)
            while let next = try receiver.open(from: &input) {
                opened.append(next)
                if opened.count == 1 {
                    #expect(input.readableBytes == 0, "the first frame opens on its last byte, not later")
                }
            }
        }
        #expect(opened == [frame, .ping(77)])
        #expect(input.readableBytes == 0)
    }

    // MARK: - Bad frames

    @Test("unknown frame types throw unknownFrameType")
    func unknownType() {
        let known = Set(Frame.FrameType.allCases.map(\.rawValue))
        var checked = 0
        for raw in UInt8.min...UInt8.max where !known.contains(raw) {
            expectError([raw, 0, 0, 0, 0, 0, 0, 0, 0, 0], .unknownFrameType, "type 0x\(String(raw, radix: 16))")
            expectError([raw, 0], .unknownFrameType, "type 0x\(String(raw, radix: 16)), no payload")
            checked += 1
        }
        #expect(checked == 256 - 6)
        let error = WeftWireError.unknownFrameType(0x2a)
        #expect(error.description.contains("0x2a"))
    }

    @Test("non-zero flags throw malformed", arguments: samples)
    func nonZeroFlags(frame: Frame) {
        for flags: UInt8 in [0x01, 0x80, 0xff] {
            var bytes = Self.encode(frame)
            bytes[1] = flags
            expectError(bytes, .malformedFrame, "flags \(flags)")
        }
    }

    static let badLengths: [(bytes: [UInt8], why: String)] = [
        ([0x01, 0] + [UInt8](repeating: 0, count: 7), "ping of 7 bytes"),
        ([0x01, 0] + [UInt8](repeating: 0, count: 9), "ping of 9 bytes"),
        ([0x02, 0], "empty pong"),
        ([0x02, 0] + [UInt8](repeating: 0, count: 16), "pong of 16 bytes"),
        ([0x03, 0, 0], "close with half a code"),
        ([0x04, 0, 0], "error with half a code"),
        ([0x03, 0, 0, 0] + [UInt8](repeating: 0x61, count: 257), "close text of 257 bytes"),
        ([0x04, 0, 0, 1] + [UInt8](repeating: 0x61, count: 1000), "error text of 1000 bytes"),
        ([0x03, 0, 0, 0, 0xff], "close text not UTF-8"),
        ([0x04, 0, 0, 1, 0x61, 0xe2, 0x82], "error text cut inside a character"),
        ([0x05, 0, 0], "rekey with a payload"),
    ]

    @Test("bad payload lengths and texts throw malformed", arguments: badLengths)
    func badLength(bytes: [UInt8], why: String) {
        expectError(bytes, .malformedFrame, Comment(rawValue: why))
    }

    @Test("a 256-byte text is the longest accepted")
    func longestText() throws {
        let text = String(repeating: "t", count: 256)
        #expect(try Frame.read(from: ByteBuffer(bytes: [0x03, 0, 0, 1] + Array(text.utf8))) == .close(.shuttingDown, text))
    }

    @Test("over-long reason texts are cut to 256 bytes on a character boundary when written")
    func reasonTextTruncated() throws {
        let ascii = Frame.close(.normal, String(repeating: "a", count: 300))
        let asciiBytes = Self.encode(ascii)
        #expect(asciiBytes.count == ascii.encodedByteCount)
        #expect(asciiBytes.count == 2 + 2 + 256)
        #expect(try Frame.read(from: ByteBuffer(bytes: asciiBytes)) == .close(.normal, String(repeating: "a", count: 256)))

        let accents = Frame.error(.internalError, "!" + String(repeating: "é", count: 200))
        let accentBytes = Self.encode(accents)
        #expect(accentBytes.count == accents.encodedByteCount)
        #expect(try Frame.read(from: ByteBuffer(bytes: accentBytes)) == .error(.internalError, "!" + String(repeating: "é", count: 127)))
    }

    @Test("data frames are slices of the input: the payload is exactly the bytes after the header")
    func dataPayload() throws {
        var buffer = ByteBuffer(bytes: [0xee, 0xee])
        buffer.moveReaderIndex(forwardBy: 2)
        buffer.writeBytes([0x10, 0, 1, 2, 3])
        guard case .data(let payload) = try Frame.read(from: buffer) else {
            Issue.record("not a data frame")
            return
        }
        #expect(payload.bytes == [1, 2, 3])
    }

    @Test("error and close codes have stable numbers and names")
    func codes() {
        #expect([ErrorCode.malformedFrame, .frameTooLarge, .unknownFrameType, .decryptionFailed, .internalError].map(\.rawValue) == [1, 2, 3, 4, 5])
        #expect([CloseCode.normal, .shuttingDown, .idleTimeout].map(\.rawValue) == [0, 1, 2])
        #expect(ErrorCode.decryptionFailed.description == "decryption failed")
        #expect(CloseCode.idleTimeout.description == "idle timeout")
        #expect(ErrorCode(rawValue: 77).description == "error code 77")
        #expect(WeftWireError.malformed("x").code == .malformedFrame)
        #expect(WeftWireError.frameTooLarge(9).code == .frameTooLarge)
        #expect(WeftWireError.decryptionFailed.code == .decryptionFailed)
        #expect(Frame.FrameType.allCases.map(\.rawValue) == [1, 2, 3, 4, 5, 0x10])
    }
}
