import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

/// The connection state machine after the handshake: bad records, keepalive, rekeying, closing.
@Suite("ConnectionStateMachine: established channel")
struct ConnectionEstablishedTests {
    typealias Side = InMemoryLink.Side

    /// Sealed record sizes: length (4) + frame header (2) + payload + tag (16).
    static func recordSize(payload: Int) -> Int { 4 + 2 + payload + 16 }

    static let policy = ChannelPolicy(
        pingInterval: .seconds(5), idleTimeout: .seconds(30), handshakeTimeout: .seconds(10),
        rekeyAfterBytes: 1 << 30, rekeyAfterTime: .minutes(60))

    static func established(_ policy: ChannelPolicy = policy) -> InMemoryLink {
        var link = InMemoryLink(policy: policy)
        link.establish()
        return link
    }

    // MARK: - (g) bad records

    @Test("a corrupted record: the receiver sends ERROR(decryption failed) and closes", arguments: [Side.initiator, .responder])
    func corruptedRecord(receiver: Side) {
        var link = Self.established()
        link.send("fine", from: receiver.other)
        link.run()
        // Damage a byte inside the next record's ciphertext.
        link.corruptions[receiver] = [link.delivered[receiver]! + 7: 0x01]
        #expect(link.send("damaged", from: receiver.other) == Self.recordSize(payload: 7))
        link.run()

        #expect(link.received(receiver) == ["fine"])
        let receiverEnd = link.closes(receiver)
        #expect(receiverEnd.map(\.kind) == [.protocolViolation])
        #expect(receiverEnd.first?.detail.contains("failed authentication") == true, "\(receiverEnd)")
        // The ERROR frame reached the sender, which closes with the peer's code.
        let senderEnd = link.closes(receiver.other)
        #expect(senderEnd.map(\.kind) == [.peerReportedError])
        #expect(senderEnd.first?.detail.contains(ErrorCode.decryptionFailed.description) == true, "\(senderEnd)")
        #expect(link.initiator.isClosed && link.responder.isClosed)
    }

    @Test("an over-long length prefix: ERROR(frame too large) and close, without waiting for the body",
          arguments: [UInt32(1 << 31), UInt32.max, UInt32(WireConstants.maxFrameByteCount + 17)])
    func overLongLength(length: UInt32) {
        var link = Self.established()
        var header = ByteBuffer()
        header.writeInteger(length)
        link.inject(header.bytes, to: .responder)
        #expect(link.closes(.responder).map(\.kind) == [.protocolViolation])
        #expect(link.writes[.responder]!.last?.readableBytes ?? 0 > Self.recordSize(payload: 2), "an ERROR record went out")
        link.run()
        let initiatorEnd = link.closes(.initiator)
        #expect(initiatorEnd.map(\.kind) == [.peerReportedError])
        #expect(initiatorEnd.first?.detail.contains(ErrorCode.frameTooLarge.description) == true, "\(initiatorEnd)")
    }

    @Test("a record length too short for a frame: ERROR(malformed frame)")
    func tooShortRecord() {
        var link = Self.established()
        link.inject([0, 0, 0, 3, 1, 2, 3], to: .initiator)
        #expect(link.closes(.initiator).map(\.kind) == [.protocolViolation])
        link.run()
        #expect(link.closes(.responder).map(\.kind) == [.peerReportedError])
        #expect(link.closes(.responder).first?.detail.contains(ErrorCode.malformedFrame.description) == true)
    }

    @Test("data after a failed record is not delivered")
    func nothingAfterFailure() {
        var link = Self.established()
        link.corruptions[.responder] = [link.delivered[.responder]! + 20: 0x04]
        link.send("first", from: .initiator)
        link.send("second", from: .initiator)
        link.run()
        #expect(link.received(.responder).isEmpty)
        #expect(link.closes(.responder).map(\.kind) == [.protocolViolation])
    }

    // MARK: - (h) keepalive

    @Test("after pingInterval of silence a PING goes out; the PONG gives the round trip")
    func pingPong() {
        var link = Self.established()
        link.advance(by: .seconds(4))
        #expect(link.tick(.initiator) == 0, "no ping before the interval")
        link.advance(by: .seconds(1))
        #expect(link.tick(.initiator) == Self.recordSize(payload: 8), "one PING record")
        link.advance(by: .milliseconds(100))
        link.deliver(to: .responder)
        #expect(link.writes[.responder]!.last?.readableBytes == Self.recordSize(payload: 8), "one PONG record")
        link.advance(by: .milliseconds(150))
        link.deliver(to: .initiator)
        #expect(link.pongs(.initiator) == [.milliseconds(250)])
        #expect(link.pongs(.responder).isEmpty)
        #expect(link.ends.isEmpty)

        // The next ping waits for another interval of sending nothing.
        #expect(link.tick(.initiator) == 0)
        link.advance(by: .seconds(5))
        #expect(link.tick(.initiator) == Self.recordSize(payload: 8))
        link.run()
        #expect(link.pongs(.initiator).count == 2)
    }

    @Test("a PING is not repeated while one is unanswered")
    func onePingAtATime() {
        var link = Self.established()
        link.advance(by: .seconds(5))
        #expect(link.tick(.initiator) > 0)
        link.advance(by: .seconds(6))
        #expect(link.tick(.initiator) == 0, "the first ping is still outstanding")
    }

    @Test("sending data postpones the ping")
    func dataPostponesPing() {
        var link = Self.established()
        link.advance(by: .seconds(4))
        link.send("busy", from: .initiator)
        link.advance(by: .seconds(4))
        #expect(link.tick(.initiator) == 0)
        link.advance(by: .seconds(1))
        #expect(link.tick(.initiator) == Self.recordSize(payload: 8))
    }

    @Test("ticking both sides regularly keeps a quiet connection alive")
    func keepaliveKeepsAlive() {
        var link = Self.established()
        for _ in 0..<120 {
            link.advance(by: .seconds(1))
            link.tick(.initiator)
            link.tick(.responder)
            link.run()
        }
        #expect(link.ends.isEmpty)
        #expect(link.pongs(.initiator).count >= 10)
        #expect(link.pongs(.responder).count >= 10)
    }

    @Test("nothing received for idleTimeout: CLOSE(idle timeout) and .close(.timeout)")
    func idleTimeout() {
        var link = Self.established()
        link.advance(by: .seconds(30) - .nanoseconds(1))
        #expect(link.closes(.initiator).isEmpty)
        link.tick(.initiator)  // sends a ping; not yet idle
        #expect(link.closes(.initiator).isEmpty)
        link.advance(by: .nanoseconds(1))
        #expect(link.tick(.initiator) == Self.recordSize(payload: 2 + "nothing received for 30 s".utf8.count))
        let end = link.closes(.initiator)
        #expect(end.map(\.kind) == [.timeout])
        #expect(end.first?.detail.contains("30 s") == true)
        link.run()  // the responder gets the ping and the CLOSE
        #expect(link.closes(.responder).map(\.kind) == [.peerClosed])
        #expect(link.closes(.responder).first?.detail.contains(CloseCode.idleTimeout.description) == true)
    }

    // MARK: - (i) rekeying

    @Test("rekey by bytes: a REKEY record precedes the first frame over the limit; traffic keeps flowing")
    func rekeyByBytes() {
        var policy = Self.policy
        policy.rekeyAfterBytes = 64
        var link = Self.established(policy)
        let message = String(repeating: "m", count: 100)
        let plain = Self.recordSize(payload: 2 + 100)
        let rekeyed = Self.recordSize(payload: 0) + plain
        var sizes: [Side: [Int]] = [.initiator: [], .responder: []]
        for round in 0..<6 {
            for side in [Side.initiator, .responder] {
                sizes[side]!.append(link.send("\(round) " + message, from: side))
                link.run()
            }
        }
        for side in Side.allCases {
            // The handshake's ping/pong (10 bytes) stays under 64; then every send crosses it.
            #expect(sizes[side] == [plain] + Array(repeating: rekeyed, count: 5), "\(side)")
            #expect(link.received(side) == (0..<6).map { "\($0) " + message })
        }
        #expect(link.ends.isEmpty)
    }

    @Test("rekey by time: a tick after rekeyAfterTime sends only a REKEY record; traffic keeps flowing")
    func rekeyByTime() {
        var policy = Self.policy
        policy.pingInterval = .hours(1)
        policy.idleTimeout = .hours(2)
        policy.rekeyAfterTime = .seconds(10)
        var link = Self.established(policy)
        link.advance(by: .seconds(9))
        #expect(link.tick(.initiator) == 0)
        link.advance(by: .seconds(1))
        for side in Side.allCases {
            #expect(link.tick(side) == Self.recordSize(payload: 0), "\(side) sends REKEY")
            #expect(link.tick(side) == 0, "\(side): once")
        }
        link.run()
        link.send("after the first rekey", from: .initiator)
        link.send("likewise", from: .responder)
        link.run()
        #expect(link.received(.responder) == ["after the first rekey"])
        #expect(link.received(.initiator) == ["likewise"])

        link.advance(by: .seconds(10))
        #expect(link.tick(.responder) == Self.recordSize(payload: 0))
        link.run()
        link.send("after the second", from: .initiator)
        link.send("and again", from: .responder)
        link.run()
        #expect(link.received(.responder).last == "after the second")
        #expect(link.received(.initiator).last == "and again")
        #expect(link.ends.isEmpty)
    }

    @Test("rekeying with every frame, byte at a time, with pings: nothing is lost")
    func rekeyStress() {
        var policy = Self.policy
        policy.rekeyAfterBytes = 1
        var link = InMemoryLink(policy: policy)
        link.chunkSize = 1
        link.establish()
        for round in 0..<10 {
            link.send("i\(round)", from: .initiator)
            link.send("r\(round)", from: .responder)
            link.advance(by: .seconds(3))
            link.tick(.initiator)
            link.tick(.responder)
            link.run()
        }
        #expect(link.received(.responder) == (0..<10).map { "i\($0)" })
        #expect(link.received(.initiator) == (0..<10).map { "r\($0)" })
        #expect(link.ends.isEmpty)
    }

    // MARK: - (j) closing

    @Test("a local close sends CLOSE; the peer ends with peerClosed and the reason",
          arguments: [Side.initiator, .responder], [CloseCode.normal, .shuttingDown])
    func localClose(closer: Side, code: CloseCode) {
        var link = Self.established()
        #expect(link.close(closer, code, reason: "maintenance window") == Self.recordSize(payload: 2 + 18))
        let local = link.closes(closer)
        #expect(local.map(\.kind) == [.localClose])
        #expect(local.first?.detail.contains("maintenance window") == true)
        link.run()
        let remote = link.closes(closer.other)
        #expect(remote.map(\.kind) == [.peerClosed])
        #expect(remote.first?.detail.contains("maintenance window") == true, "\(remote)")
        #expect(remote.first?.detail.contains(code.description) == true, "\(remote)")
    }

    @Test("data sent just before a close still arrives")
    func dataBeforeClose() {
        var link = Self.established()
        link.send("last words", from: .initiator)
        link.close(.initiator, .normal, reason: "bye")
        link.run()
        #expect(link.received(.responder) == ["last words"])
        #expect(link.closes(.responder).map(\.kind) == [.peerClosed])
    }

    @Test("the connection closing without CLOSE is connectionLost; after an end, connectionClosed() is nil")
    func connectionLost() {
        var link = Self.established()
        var initiator = link.initiator
        #expect(initiator.connectionClosed()?.kind == .connectionLost)
        #expect(initiator.connectionClosed() == nil)
        link.close(.responder, .normal, reason: "x")
        var responder = link.responder
        #expect(responder.connectionClosed() == nil)
    }
}
