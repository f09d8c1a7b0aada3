import Foundation
import NIOCore
import Testing
import WeftCrypto
import WeftModel
import WeftSync

/// `Protocol/vectors/reconciliation.json` (SPEC.md §14.3), checked in both directions.
struct ReconciliationVectors: Decodable, Sendable {
    struct Limits: Decodable, Sendable {
        var maxRangeCount: Int
        var maxEntryCount: Int
        var idListThreshold: Int
        var splitCount: Int
    }

    struct Entry: Decodable, Sendable {
        var conversation: String
        var digest: String
        var itemHash: String?
    }

    struct Items: Decodable, Sendable {
        var entries: [Entry]
        var fingerprint: String
        var emptyFingerprint: String
    }

    struct Item: Decodable, Sendable {
        var conversation: String
        var hashPrefix: String
    }

    struct Range: Decodable, Sendable {
        var upperBound: String
        var mode: String
        var fingerprint: String?
        var items: [Item]?
        var conversations: [String]?
    }

    struct Message: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var ranges: [Range]
        var bodyHex: String
        var expectsReply: Bool
        var testDescription: String { description }
    }

    struct Step: Decodable, Sendable {
        var from: String
        var ranges: [Range]
        var bodyHex: String
        var receiverLearns: [String]
    }

    struct Exchange: Decodable, Sendable {
        var initiator: [Entry]
        var responder: [Entry]
        var steps: [Step]
        var differing: [String]
    }

    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var bodyHex: String
        var error: String
        var testDescription: String { description }
    }

    var limits: Limits
    var items: Items
    var messages: [Message]
    var exchange: Exchange
    var invalid: [Invalid]

    static func load() throws -> ReconciliationVectors {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // WeftSyncTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package
            .appendingPathComponent("Protocol/vectors/reconciliation.json")
        return try JSONDecoder().decode(Self.self, from: Data(contentsOf: url))
    }

    static func set(_ entries: [Entry]) -> ReconciliationSet {
        ReconciliationSet(entries.map { (ConversationID(bytes: bytes($0.conversation))!, SetDigest(bytes: bytes($0.digest))!) })
    }

    /// The message a vector's ranges describe.
    static func message(_ ranges: [Range]) throws -> HaveMessage {
        try HaveMessage(ranges: ranges.map { range in
            let bound = range.upperBound == "end" ? ReconciliationBound.end : ReconciliationBound(prefix: bytes(range.upperBound))!
            let mode: ReconciliationRange.Mode =
                switch range.mode {
                case "skip": .skip
                case "fingerprint": .fingerprint(RangeFingerprint(bytes: bytes(range.fingerprint!))!)
                case "idList":
                    .idList(range.items!.map {
                        ReconciliationItem(
                            conversation: ConversationID(bytes: bytes($0.conversation))!,
                            hashPrefix: bytes($0.hashPrefix).reduce(0) { $0 << 8 | UInt64($1) })
                    })
                default: .differing(range.conversations!.map { ConversationID(bytes: bytes($0))! })
                }
            return ReconciliationRange(upperBound: bound, mode: mode)
        })
    }
}

@Suite("Protocol vectors: HAVE, reconciliation (SPEC.md §14.3)")
struct ReconciliationVectorTests {
    @Test("the limits are the vector's")
    func limits() throws {
        let limits = try ReconciliationVectors.load().limits
        #expect(HaveMessage.maxRangeCount == limits.maxRangeCount)
        #expect(HaveMessage.maxEntryCount == limits.maxEntryCount)
        #expect(Reconciler.idListThreshold == limits.idListThreshold)
        #expect(Reconciler.splitCount == limits.splitCount)
        // The largest body still fits one DATA payload: every range with a head, a 16-byte bound
        // and the larger of a fingerprint and a list count, and every entry an id-list item.
        let largest = 2 + limits.maxRangeCount * (1 + 16 + max(RangeFingerprint.byteCount, 2)) + limits.maxEntryCount * 24
        #expect(largest <= SyncEnvelope.maxBodyByteCount)
    }

    @Test("item hashes and fingerprints are the vector's")
    func fingerprints() throws {
        let items = try ReconciliationVectors.load().items
        for entry in items.entries {
            #expect(BLAKE2b.hash(bytes(entry.conversation), bytes(entry.digest), outputByteCount: 32) == bytes(entry.itemHash!))
        }
        let first = Reconciler(set: ReconciliationVectors.set(items.entries)).initiate()
        let expected = try HaveMessage(ranges: [
            ReconciliationRange(upperBound: .end, mode: .fingerprint(RangeFingerprint(bytes: bytes(items.fingerprint))!))
        ])
        #expect(first == expected)
        // The empty set's fingerprint, as a responder holding nothing computes it for a range.
        let (reply, _) = try Reconciler(set: ReconciliationSet([])).respond(to: first)
        #expect(reply?.ranges == [ReconciliationRange(upperBound: .end, mode: .idList([]))])
        let emptyProbe = try HaveMessage(ranges: [
            ReconciliationRange(upperBound: .end, mode: .fingerprint(RangeFingerprint(bytes: bytes(items.emptyFingerprint))!))
        ])
        #expect(try Reconciler(set: ReconciliationSet([])).respond(to: emptyProbe).reply?.ranges == [])
    }

    @Test("encoding gives the vector's bytes", arguments: try ReconciliationVectors.load().messages)
    func encode(_ vector: ReconciliationVectors.Message) throws {
        let message = try ReconciliationVectors.message(vector.ranges)
        #expect(message.bodyBytes == bytes(vector.bodyHex))
        #expect(message.bodyByteCount == bytes(vector.bodyHex).count)
        #expect(message.expectsReply == vector.expectsReply)
    }

    @Test("the vector's bytes decode to its ranges", arguments: try ReconciliationVectors.load().messages)
    func decode(_ vector: ReconciliationVectors.Message) throws {
        #expect(try HaveMessage(body: bytes(vector.bodyHex)) == ReconciliationVectors.message(vector.ranges))
    }

    @Test("each side of the exchange writes the vector's messages and learns the vector's differences")
    func exchange() throws {
        let exchange = try ReconciliationVectors.load().exchange
        let sides = [
            Reconciler(set: ReconciliationVectors.set(exchange.initiator)),
            Reconciler(set: ReconciliationVectors.set(exchange.responder)),
        ]
        var learned: [Set<ConversationID>] = [[], []]
        var message: HaveMessage? = sides[0].initiate()
        var sender = 0
        for step in exchange.steps {
            let sent = try #require(message)
            #expect(step.from == (sender == 0 ? "initiator" : "responder"))
            #expect(sent == (try ReconciliationVectors.message(step.ranges)))
            #expect(sent.bodyBytes == bytes(step.bodyHex))
            let (reply, differing) = try sides[1 - sender].respond(to: try HaveMessage(body: bytes(step.bodyHex)))
            #expect(differing.map(\.hex) == step.receiverLearns)
            learned[1 - sender].formUnion(differing)
            message = reply
            sender = 1 - sender
        }
        #expect(message == nil)
        let expected = Set(exchange.differing.map { ConversationID(bytes: bytes($0))! })
        #expect(learned == [expected, expected])
    }

    @Test("invalid bodies are refused with the vector's error", arguments: try ReconciliationVectors.load().invalid)
    func invalid(_ vector: ReconciliationVectors.Invalid) throws {
        let body = bytes(vector.bodyHex)
        do {
            _ = try HaveMessage(body: body)
            Issue.record("accepted: \(vector.description)")
        } catch {
            switch vector.error {
            case "truncated": #expect(error == .truncated(.have))
            case "trailingBytes": #expect(error == .trailingBytes(.have, 1))
            default:
                #expect(error != .truncated(.have), "\(error)")
                #expect(!(0...body.count).contains { error == .trailingBytes(.have, $0) }, "\(error)")
                #expect(error.description.hasPrefix("malformed HAVE message: "), "\(error)")
            }
            #expect(error.code == .malformedSyncMessage)
        }
    }
}
