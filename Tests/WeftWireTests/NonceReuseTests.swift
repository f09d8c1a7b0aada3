import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

/// ChaCha20-Poly1305 under one key must never seal twice with one nonce. The cipher states are
/// references that own their nonces, so even a copy of a codec or a connection, sealing beside
/// the original, takes the next nonce. Each test seals the same plaintext twice, through a copy
/// and through the original: a reused nonce would give the same record twice, and the peer
/// could not open both in order.
@Suite("Nonces are never reused")
struct NonceReuseTests {
    static let key = SecureBytes(copying: [UInt8](repeating: 0x42, count: CipherState.keyByteCount))

    /// The sealed bytes of a record (without the length).
    static func ciphertext(_ record: ByteBuffer) -> [UInt8] { Array(record.readableBytesView.dropFirst(4)) }

    @Test("a CipherState and its copies share one counter")
    func cipherState() throws {
        let sender = CipherState(key: Self.key)
        let alias = sender
        let first = try alias.encrypt(associatedData: [], plaintext: [1, 2, 3])
        let second = try sender.encrypt(associatedData: [], plaintext: [1, 2, 3])
        #expect(first != second)
        #expect(sender.nonce == 2)

        // Each ciphertext opens at exactly its own nonce.
        let reader = CipherState(key: Self.key)
        #expect(throws: WeftCryptoError.decryptionFailed) { try reader.decrypt(associatedData: [], ciphertext: second) }
        #expect(try reader.decrypt(associatedData: [], ciphertext: first) == [1, 2, 3])
        #expect(try reader.decrypt(associatedData: [], ciphertext: second) == [1, 2, 3])
    }

    @Test("codec: a copy seals with the next nonce, and a rekey through a copy holds for the original")
    func codec() throws {
        var original = TransportCodec(send: CipherState(key: Self.key), receive: CipherState(key: Self.key))
        var copy = original
        var first = ByteBuffer()
        var second = ByteBuffer()
        try copy.seal(.ping(7), into: &first)
        try original.seal(.ping(7), into: &second)
        #expect(Self.ciphertext(first) != Self.ciphertext(second))

        // A plain Noise reader confirms the nonces: 0 for the copy's record, 1 for the original's.
        let reader = CipherState(key: Self.key)
        #expect(try reader.decrypt(associatedData: [], ciphertext: Self.ciphertext(first)) == [1, 0, 0, 0, 0, 0, 0, 0, 0, 7])
        #expect(reader.nonce == 1)
        #expect(try reader.decrypt(associatedData: [], ciphertext: Self.ciphertext(second)) == [1, 0, 0, 0, 0, 0, 0, 0, 0, 7])

        // The copy rekeys; the original's next record is under the new key, at nonce 3.
        var rekey = ByteBuffer()
        try copy.seal(.rekey, into: &rekey)
        copy.rekeySending()
        var after = ByteBuffer()
        try original.seal(.ping(7), into: &after)
        let receiver = TransportCodec(send: CipherState(key: Self.key), receive: CipherState(key: Self.key))
        var wire = first
        wire.writeImmutableBuffer(second)
        wire.writeImmutableBuffer(rekey)
        wire.writeImmutableBuffer(after)
        var opened: [Frame] = []
        while let frame = try receiver.open(from: &wire) { opened.append(frame) }
        #expect(opened == [.ping(7), .ping(7), .rekey, .ping(7)])
    }

    /// Two established machines, taken out of a link so the test drives them by hand.
    static func established(policy: ChannelPolicy) -> (ConnectionStateMachine, ConnectionStateMachine, NIODeadline) {
        var link = InMemoryLink(policy: policy)
        link.establish()
        return (link.initiator, link.responder, link.now)
    }

    static func written(_ actions: [ConnectionAction]) -> ByteBuffer {
        var bytes = ByteBuffer()
        for case .write(var buffer) in actions { bytes.writeBuffer(&buffer) }
        return bytes
    }

    /// Feeds `records` to `receiver` in order; returns the data it delivered, and fails on a close.
    static func deliver(_ records: [ByteBuffer], to receiver: inout ConnectionStateMachine, now: NIODeadline) -> [String] {
        var data: [String] = []
        for record in records {
            for action in receiver.receive(record, now: now) {
                switch action {
                case .data(let bytes): data.append(String(buffer: bytes))
                case .close(let end): Issue.record("the receiver closed: \(end)")
                case .write, .authenticated, .pong: break
                }
            }
        }
        return data
    }

    @Test("state machine: a copy and the original send the same data; every record differs and all open in order")
    func stateMachine() {
        var (sender, receiver, now) = Self.established(policy: .default)
        var copy = sender
        var records: [ByteBuffer] = []
        for _ in 0..<3 {
            records.append(Self.written(copy.send(data: ByteBuffer(string: "same"), now: now)))
            records.append(Self.written(sender.send(data: ByteBuffer(string: "same"), now: now)))
        }
        #expect(Set(records.map(Self.ciphertext)).count == records.count, "a record repeated: a nonce was reused")
        #expect(Self.deliver(records, to: &receiver, now: now) == Array(repeating: "same", count: 6))
    }

    @Test("state machine: rekeys by bytes and by time, through copies, never repeat a record")
    func stateMachineRekey() {
        let policy = ChannelPolicy(idleTimeout: .hours(2), rekeyAfterBytes: 64, rekeyAfterTime: .minutes(1))
        var (sender, receiver, now) = Self.established(policy: policy)
        var records: [ByteBuffer] = []
        var expected: [String] = []
        let payload = String(repeating: "r", count: 30)
        for round in 0..<8 {
            // Every few sends cross 64 bytes (a REKEY frame first); every round a minute passes.
            var copy = sender
            records.append(Self.written(copy.send(data: ByteBuffer(string: payload), now: now)))
            records.append(Self.written(sender.send(data: ByteBuffer(string: payload), now: now)))
            expected += [payload, payload]
            now = now + .seconds(61)
            var ticking = round.isMultiple(of: 2) ? copy : sender
            records.append(Self.written(ticking.tick(now: now)))
        }
        records.removeAll { $0.readableBytes == 0 }
        #expect(Set(records.map(Self.ciphertext)).count == records.count, "a record repeated: a nonce was reused")
        #expect(Self.deliver(records, to: &receiver, now: now) == expected)
    }
}
