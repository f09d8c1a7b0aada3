import NIOCore
import Testing
import WeftModel
import WeftSync

@Suite("HAVE bodies: round trips and hostile input (SPEC.md §14.3)")
struct ReconciliationMessageTests {
    /// Every message of a reconciliation with differences on both sides.
    static func someMessages() throws -> [HaveMessage] {
        let pair = randomPair(seed: 11, shared: 600, changed: 20, onlyInitiator: 10, onlyResponder: 10)
        let sides = [Reconciler(set: pair.initiator), Reconciler(set: pair.responder)]
        var messages = [sides[0].initiate()]
        var receiver = 1
        while let reply = try sides[receiver].respond(to: messages.last!).reply {
            messages.append(reply)
            receiver = 1 - receiver
        }
        return messages
    }

    @Test("every message of a reconciliation survives its encoding; every strict prefix is truncated")
    func roundTrips() throws {
        let messages = try Self.someMessages()
        #expect(messages.count > 4)
        for message in messages {
            let body = message.bodyBytes
            #expect(body.count == message.bodyByteCount)
            #expect(try HaveMessage(body: body) == message)
            var buffer = ByteBuffer(bytes: [0xaa])
            #expect(message.encodeBody(into: &buffer) == body.count)
            #expect(try HaveMessage(body: buffer.getSlice(at: 1, length: body.count)!) == message)
            // Every short prefix, then prefixes cut at a stride (each read is linear, so every
            // prefix of a long body would be quadratic).
            for length in stride(from: 0, to: body.count, by: body.count < 256 ? 1 : 7) {
                #expect(throws: SyncMessageError.truncated(.have)) { try HaveMessage(body: Array(body[..<length])) }
            }
        }
    }

    @Test("random and mutated bodies are refused with an error or read back to the same bytes, never a trap")
    func hostileBytes() throws {
        var random = ReconciliationRandom(seed: 12)
        var bodies: [[UInt8]] = []
        for message in try Self.someMessages() {
            for _ in 0..<40 {
                var body = message.bodyBytes
                let index = Int.random(in: 0..<body.count, using: &random)
                body[index] = UInt8.random(in: 0...255, using: &random)
                bodies.append(body)
            }
        }
        for _ in 0..<2_000 {
            var body = random.bytes(Int.random(in: 0...64, using: &random))
            if body.count >= 2 { body[0] = 0; body[1] = UInt8.random(in: 0...3, using: &random) }
            bodies.append(body)
        }
        var accepted = 0
        for body in bodies {
            do {
                let message = try HaveMessage(body: body)
                #expect(message.bodyBytes == body)
                accepted += 1
            } catch {
                #expect(error.code == .malformedSyncMessage)
            }
        }
        #expect(accepted > 0 && accepted < bodies.count)
    }

    @Test("a reply to the largest hostile HAVE keeps the limits")
    func boundedReply() throws {
        var random = ReconciliationRandom(seed: 13)
        let set = ReconciliationSet((0..<10_000).map { _ in (random.conversation(), random.digest()) })
        // 1,199 fingerprint ranges of about 8 items that all differ, then one to the end: the
        // responder splits each into 4 while they fit and fingerprints the rest.
        var ranges: [ReconciliationRange] = (1..<1_200).map { index in
            ReconciliationRange(
                upperBound: ReconciliationBound(prefix: [UInt8((index * 54) >> 8), UInt8(truncatingIfNeeded: index * 54)])!,
                mode: .fingerprint(RangeFingerprint(bytes: random.bytes(RangeFingerprint.byteCount))!))
        }
        ranges.append(ReconciliationRange(upperBound: .end, mode: .fingerprint(RangeFingerprint(bytes: random.bytes(RangeFingerprint.byteCount))!)))
        let reply = try #require(try Reconciler(set: set).respond(to: try HaveMessage(ranges: ranges)).reply)
        #expect(reply.ranges.count <= HaveMessage.maxRangeCount)
        #expect(reply.ranges.count > HaveMessage.maxRangeCount - Reconciler.splitCount - 2)
        #expect(reply.ranges.last?.upperBound == .end)
        #expect(try HaveMessage(body: reply.bodyBytes) == reply)
        #expect(reply.bodyBytes.count <= SyncEnvelope.maxBodyByteCount)

        // An empty id-list over everything: the responder lists what fits and fingerprints the rest.
        let (listed, differing) = try Reconciler(set: set).respond(to: try HaveMessage(ranges: [ReconciliationRange(upperBound: .end, mode: .idList([]))]))
        #expect(differing.count == HaveMessage.maxEntryCount)
        #expect(listed?.ranges.count == 2)
        #expect(listed?.expectsReply == true)
    }

    @Test("the public initializer refuses what the reader refuses")
    func constructedMessages() throws {
        let a = ConversationID(bytes: Array(repeating: 0x20, count: 16))!
        let b = ConversationID(bytes: Array(repeating: 0x30, count: 16))!
        let bound = ReconciliationBound(prefix: [0x28])!
        #expect(ReconciliationBound(prefix: Array(repeating: 1, count: 17)) == nil)
        #expect(RangeFingerprint(bytes: [1, 2, 3]) == nil)
        #expect(throws: SyncMessageError.self) {
            try HaveMessage(ranges: [ReconciliationRange(upperBound: bound, mode: .differing([b]))])
        }
        #expect(throws: SyncMessageError.self) {
            try HaveMessage(ranges: [ReconciliationRange(upperBound: .end, mode: .differing([b, a]))])
        }
        #expect(throws: SyncMessageError.self) {
            try HaveMessage(ranges: [ReconciliationRange(upperBound: .end, mode: .skip), ReconciliationRange(upperBound: .end, mode: .skip)])
        }
        let valid = try HaveMessage(ranges: [
            ReconciliationRange(upperBound: bound, mode: .differing([a])),
            ReconciliationRange(upperBound: .end, mode: .idList([ReconciliationItem(conversation: b, hashPrefix: 7)])),
        ])
        #expect(valid.expectsReply)
        #expect(try HaveMessage(body: valid.body) == valid)
    }
}
