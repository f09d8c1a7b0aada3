import NIOCore
import Testing
import WeftControl

/// The frame reader against partial and damaged input (SPEC.md §15.2).
@Suite("Control frames: byte at a time, truncated, limits")
struct ControlCodecTests {
    let vectors = try! ControlVectors.load()

    private func allFrames() -> [[UInt8]] {
        (vectors.entries("requests") + vectors.entries("responses")).map { entry in
            let hex = entry["hex"] as! String
            return stride(from: 0, to: hex.count, by: 2).map {
                UInt8(hex[hex.index(hex.startIndex, offsetBy: $0)..<hex.index(hex.startIndex, offsetBy: $0 + 2)], radix: 16)!
            }
        }
    }

    @Test("a frame arriving a byte at a time reads only once complete, the same as whole")
    func byteAtATime() throws {
        for bytes in allFrames() {
            var whole = ByteBuffer(bytes: bytes)
            let expected = try #require(try ControlFrame.read(from: &whole))
            var buffer = ByteBuffer()
            for (index, byte) in bytes.enumerated() {
                buffer.writeInteger(byte)
                let frame = try ControlFrame.read(from: &buffer)
                if index < bytes.count - 1 {
                    #expect(frame == nil)
                } else {
                    #expect(frame == expected)
                }
            }
        }
    }

    @Test("a body cut short by one byte is malformed, for every request and response with a body")
    func truncatedBodies() throws {
        for bytes in allFrames() where bytes.count > 9 {
            var cut = Array(bytes.dropLast())
            cut.replaceSubrange(0..<4, with: withUnsafeBytes(of: UInt32(cut.count - 4).bigEndian, Array.init))
            var buffer = ByteBuffer(bytes: cut)
            let frame = try #require(try ControlFrame.read(from: &buffer))
            let isRequest = frame.type < 0x80
            if isRequest, frame.type == 0x31 {
                // WATCH's flags byte is optional: without it, the watch streams no messages.
                #expect(try ControlRequest(frame: frame) == .watch(messages: false))
                continue
            }
            #expect(throws: ControlFailure.self) {
                if isRequest { _ = try ControlRequest(frame: frame) } else { _ = try ControlResponse(frame: frame) }
            }
        }
    }

    @Test("the largest frame is accepted and one byte more is refused from its length alone")
    func limits() throws {
        let body = ByteBuffer(repeating: 0, count: ControlConstants.maxFrameByteCount - ControlConstants.headerByteCount)
        var largest = ControlFrame(type: 0x20, requestID: 1, body: body).encoded
        #expect(try ControlFrame.read(from: &largest)?.body.readableBytes == body.readableBytes)
        var tooLarge = ByteBuffer(integer: UInt32(ControlConstants.maxFrameByteCount + 1))
        #expect(throws: ControlFailure(.frameTooLarge, "A control frame of 1048577 bytes is over the limit of 1048576 bytes.")) {
            try ControlFrame.read(from: &tooLarge)
        }
    }

    @Test("requests round-trip through their frames")
    func roundTrips() throws {
        let requests: [ControlRequest] = [
            .ping(.max), .conversations(offset: .max), .wait(.message(.init(bytes: Array(repeating: 7, count: 32))!), timeoutMilliseconds: 0),
            .send([.init(mimeType: "application/octet-stream", data: Array(repeating: 0xab, count: 100_000))],
                in: .init(bytes: Array(repeating: 1, count: 16))!),
            .createConversation(.init(participants: [], distinct: false, announce: false, metadata: ["é": "ü", "k": ""])),
        ]
        for request in requests {
            var encoded = request.frame(requestID: 77).encoded
            let frame = try #require(try ControlFrame.read(from: &encoded))
            #expect(frame.requestID == 77)
            #expect(try ControlRequest(frame: frame) == request)
        }
    }
}

@Suite("Delivery status order")
struct DeliveryStatusOrderTests {
    @Test("statuses compare in the model's order; failed is below pending, so never counts as delivered")
    func order() {
        #expect([DeliveryStatus.read, .failed, .sent, .invalid, .delivered, .pending].sorted() == [.invalid, .failed, .pending, .sent, .delivered, .read])
        #expect(DeliveryStatus.failed < .delivered)
        #expect(!(DeliveryStatus.failed >= .sent))
    }
}
