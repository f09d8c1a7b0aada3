import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

extension TransportCodec {
    /// Two codecs facing each other: what the first sends, the second opens, and back.
    static func pair() -> (TransportCodec, TransportCodec) {
        let forward = SecureBytes.random(count: 32)
        let backward = SecureBytes.random(count: 32)
        return (
            TransportCodec(send: CipherState(key: forward), receive: CipherState(key: backward)),
            TransportCodec(send: CipherState(key: backward), receive: CipherState(key: forward))
        )
    }
}

@Suite("TransportCodec")
struct TransportCodecTests {
    private func expectError(
        _ code: ErrorCode, opening buffer: inout ByteBuffer, with codec: inout TransportCodec,
        _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do throws(WeftWireError) {
            let frame = try codec.open(from: &buffer)
            Issue.record("opened \(String(describing: frame)) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == code, "\(error) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
        }
    }

    private func header(_ length: UInt32) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(length)
        return buffer
    }

    @Test("frames go both ways")
    func bothWays() throws {
        var (a, b) = TransportCodec.pair()
        var wire = ByteBuffer()
        try a.seal(.data(ByteBuffer(string: "hello")), into: &wire)
        #expect(try b.open(from: &wire) == .data(ByteBuffer(string: "hello")))
        try b.seal(.pong(5), into: &wire)
        #expect(try a.open(from: &wire) == .pong(5))
        // Each direction has its own key: a record does not open on the side that sealed it.
        try a.seal(.ping(1), into: &wire)
        var copy = wire
        expectError(.decryptionFailed, opening: &copy, with: &a)
        #expect(try b.open(from: &wire) == .ping(1))
    }

    @Test("a length over the maximum throws frameTooLarge from the header alone",
          arguments: [UInt32(1 << 31), .max, UInt32(WireConstants.maxFrameByteCount + 17), UInt32(WireConstants.maxFrameByteCount * 2)])
    func frameTooLarge(length: UInt32) {
        var (_, b) = TransportCodec.pair()
        // Only the four-byte header: a codec that waited for (or allocated) the body would return nil.
        var buffer = header(length)
        expectError(.frameTooLarge, opening: &buffer, with: &b, "length \(length)")
        #expect(buffer.readerIndex == 0)
    }

    @Test("the largest legal length waits for its body")
    func largestLegalLength() throws {
        var (a, b) = TransportCodec.pair()
        var buffer = header(UInt32(WireConstants.maxFrameByteCount + 16))
        #expect(try b.open(from: &buffer) == nil)

        // And a frame of exactly the maximum size goes through.
        let payload = ByteBuffer(repeating: 0x5a, count: WireConstants.maxFrameByteCount - 2)
        var wire = ByteBuffer()
        try a.seal(.data(payload), into: &wire)
        #expect(wire.readableBytes == 4 + WireConstants.maxFrameByteCount + 16)
        #expect(try b.open(from: &wire) == .data(payload))
    }

    @Test("a length too short for a header and tag throws malformed", arguments: Array(UInt32(0)...17))
    func tooShort(length: UInt32) {
        var (_, b) = TransportCodec.pair()
        var buffer = header(length)
        buffer.writeRepeatingByte(0, count: Int(length))
        expectError(.malformedFrame, opening: &buffer, with: &b, "length \(length)")
    }

    @Test("a flipped bit anywhere in the sealed bytes throws decryptionFailed; the cipher does not advance")
    func flippedBit() throws {
        var (a, b) = TransportCodec.pair()
        var record = ByteBuffer()
        try a.seal(.data(ByteBuffer(string: "payload")), into: &record)
        let bytes = record.bytes
        for position in 4..<bytes.count {
            for mask: UInt8 in [0x01, 0x80] {
                var damaged = bytes
                damaged[position] ^= mask
                var buffer = ByteBuffer(bytes: damaged)
                expectError(.decryptionFailed, opening: &buffer, with: &b, "byte \(position) ^ \(mask)")
            }
        }
        // The genuine record still opens: failures did not move the receiving nonce.
        #expect(try b.open(from: &record) == .data(ByteBuffer(string: "payload")))
    }

    @Test("a replayed or reordered record throws decryptionFailed")
    func replayAndReorder() throws {
        var (a, b) = TransportCodec.pair()
        var first = ByteBuffer()
        var second = ByteBuffer()
        try a.seal(.ping(1), into: &first)
        try a.seal(.ping(2), into: &second)
        var secondCopy = second
        expectError(.decryptionFailed, opening: &secondCopy, with: &b, "second before first")
        var firstCopy = first
        #expect(try b.open(from: &firstCopy) == .ping(1))
        var replay = first
        expectError(.decryptionFailed, opening: &replay, with: &b, "first again")
        #expect(try b.open(from: &second) == .ping(2))
    }

    @Test("a rekey frame switches keys on both sides")
    func rekey() throws {
        let forward = SecureBytes.random(count: 32)
        let backward = SecureBytes.random(count: 32)
        var a = TransportCodec(send: CipherState(key: forward), receive: CipherState(key: backward))
        var b = TransportCodec(send: CipherState(key: backward), receive: CipherState(key: forward))
        var wire = ByteBuffer()
        try a.seal(.data(ByteBuffer(string: "before")), into: &wire)
        #expect(a.bytesSentSinceRekey == 2 + 6)
        try a.seal(.rekey, into: &wire)
        a.rekeySending()
        #expect(a.bytesSentSinceRekey == 0)
        var after = ByteBuffer()
        try a.seal(.data(ByteBuffer(string: "after")), into: &after)
        #expect(a.bytesSentSinceRekey == 2 + 5)

        // The third record is sealed under REKEY(forward) at nonce 2, not under the old key.
        let stale = CipherState(key: forward)
        stale.setNonce(2)
        var staleCodec = TransportCodec(send: CipherState(key: backward), receive: stale)
        var afterCopy = after
        expectError(.decryptionFailed, opening: &afterCopy, with: &staleCodec, "under the old key")
        let rekeyed = CipherState(key: forward)
        rekeyed.rekey()
        rekeyed.setNonce(2)
        let rekeyedCodec = TransportCodec(send: CipherState(key: backward), receive: rekeyed)
        afterCopy = after
        #expect(try rekeyedCodec.open(from: &afterCopy) == .data(ByteBuffer(string: "after")))

        // The receiver switches by itself when it opens the rekey frame.
        #expect(try b.open(from: &wire) == .data(ByteBuffer(string: "before")))
        #expect(try b.open(from: &wire) == .rekey)
        #expect(try b.open(from: &after) == .data(ByteBuffer(string: "after")))

        // The other direction is untouched.
        try b.seal(.pong(3), into: &wire)
        #expect(try a.open(from: &wire) == .pong(3))
    }

    @Test("a sender that sends REKEY but keeps its old key is caught by the receiver")
    func rekeyWithoutSwitching() throws {
        var (a, b) = TransportCodec.pair()
        var wire = ByteBuffer()
        try a.seal(.rekey, into: &wire)
        // a forgets rekeySending()
        try a.seal(.ping(9), into: &wire)
        #expect(try b.open(from: &wire) == .rekey)
        expectError(.decryptionFailed, opening: &wire, with: &b)
    }

    @Test("several records in one buffer are all opened, a partial one waits")
    func severalRecords() throws {
        var (a, b) = TransportCodec.pair()
        let frames: [Frame] = [.ping(1), .data(ByteBuffer(string: "x")), .rekey, .pong(2), .close(.normal, "bye"), .data(ByteBuffer())]
        var wire = ByteBuffer()
        for frame in frames {
            try a.seal(frame, into: &wire)
            if case .rekey = frame { a.rekeySending() }
        }
        var tail = ByteBuffer()
        try a.seal(.ping(99), into: &tail)
        let tailBytes = tail.bytes
        wire.writeBytes(tailBytes.prefix(10))

        var opened: [Frame] = []
        while let frame = try b.open(from: &wire) { opened.append(frame) }
        #expect(opened == frames)
        #expect(wire.readableBytes == 10)
        wire.writeBytes(tailBytes.dropFirst(10))
        #expect(try b.open(from: &wire) == .ping(99))
        #expect(try b.open(from: &wire) == nil)
    }

    @Test("bytesSentSinceRekey counts plaintext frame bytes")
    func byteCounting() throws {
        var (a, _) = TransportCodec.pair()
        var wire = ByteBuffer()
        try a.seal(.ping(1), into: &wire)
        try a.seal(.data(ByteBuffer(repeating: 1, count: 100)), into: &wire)
        try a.seal(.close(.normal, "ok"), into: &wire)
        #expect(a.bytesSentSinceRekey == 10 + 102 + 6)
    }

    @Test("an undecodable frame inside a good record throws the frame's error")
    func badFrameInsideRecord() throws {
        // Seal a raw unknown-type frame with the codec's own cipher to reach Frame.read.
        let key = SecureBytes.random(count: 32)
        let cipher = CipherState(key: key)
        var codec = TransportCodec(send: CipherState(key: SecureBytes.random(count: 32)), receive: CipherState(key: key))
        for (plaintext, code) in [([UInt8]([0x42, 0]), ErrorCode.unknownFrameType), ([0x01, 0, 1], .malformedFrame), ([0x05, 1], .malformedFrame)] {
            let sealed = try cipher.encrypt(associatedData: [], plaintext: plaintext)
            var buffer = ByteBuffer()
            buffer.writeInteger(UInt32(sealed.count))
            buffer.writeBytes(sealed)
            expectError(code, opening: &buffer, with: &codec, "\(plaintext.hex)")
        }
    }
}
