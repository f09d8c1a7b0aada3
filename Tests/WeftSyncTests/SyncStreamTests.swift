import Foundation
import NIOCore
import Testing
import WeftCompression
import WeftModel
import WeftSync
import WeftWire

/// `Protocol/vectors/sync-stream.json` (SPEC.md §14.11).
struct SyncStreamVectors: Decodable, Sendable {
    struct Step: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var plainHex: String
        var compressed: Bool
        var wireHex: String
        var testDescription: String { description }
    }

    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        /// DATA payloads in arrival order: all but the last decode.
        var wireHex: [String]
        var error: String
        var errorCode: UInt16
        var testDescription: String { description }
    }

    var windowLog: Int32
    var minimumPayloadByteCount: Int
    var stream: [Step]
    var invalid: [Invalid]

    static func load() throws -> SyncStreamVectors {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/sync-stream.json")
        return try JSONDecoder().decode(Self.self, from: Data(contentsOf: url))
    }
}

@Suite("Protocol vectors: compressed sync streams (SPEC.md §14.11)")
struct SyncStreamVectorTests {
    @Test("the limits are the vector's")
    func limits() throws {
        let vectors = try SyncStreamVectors.load()
        #expect(SyncCompression.windowLog == vectors.windowLog)
        #expect(SyncCompression.minimumPayloadByteCount == vectors.minimumPayloadByteCount)
    }

    @Test("the DATA payloads decode in order to the plain messages, each a valid sync message")
    func decode() throws {
        let decoder = SyncStreamDecoder()
        for step in try SyncStreamVectors.load().stream {
            let plain = try decoder.decode(ByteBuffer(bytes: bytes(step.wireHex)))
            #expect(Array(plain.readableBytesView) == bytes(step.plainHex), "\(step.description)")
            _ = try SyncMessage(payload: plain)
        }
    }

    // zstd encoders may differ in the bytes they choose, so encoding is checked by what it
    // decides (plain or compressed) and by decoding it, not byte for byte.
    @Test("encoding compresses exactly the steps marked compressed, and decodes back")
    func encode() throws {
        let encoder = SyncStreamEncoder()
        let decoder = SyncStreamDecoder()
        for step in try SyncStreamVectors.load().stream {
            let plain = ByteBuffer(bytes: bytes(step.plainHex))
            let wire = encoder.encode(plain)
            #expect((wire.getInteger(at: 0, as: UInt8.self) == SyncMessageType.compressed.rawValue) == step.compressed)
            if !step.compressed { #expect(wire == plain) }
            #expect(try decoder.decode(wire) == plain, "\(step.description)")
        }
    }

    @Test("invalid streams are refused at their last payload, with code 6", arguments: try SyncStreamVectors.load().invalid)
    func invalid(_ vector: SyncStreamVectors.Invalid) throws {
        #expect(vector.error == "invalidCompression")
        let decoder = SyncStreamDecoder()
        for hex in vector.wireHex.dropLast() { _ = try decoder.decode(ByteBuffer(bytes: bytes(hex))) }
        let error = #expect(throws: SyncMessageError.self) {
            try decoder.decode(ByteBuffer(bytes: bytes(vector.wireHex.last!)))
        }
        #expect(error?.code.rawValue == vector.errorCode)
        #expect(error?.description.hasPrefix("malformed COMPRESSED message") == true)
    }
}

@Suite("Compressed sync streams (SPEC.md §14.11)")
struct SyncStreamTests {
    /// OPERATIONS of a conversation's operations, then STORED naming them: the second message
    /// repeats the conversation and author of the first.
    static func messages() throws -> [SyncMessage] {
        let ops = try SyncFixtures.conversation(messages: 3)
        let conversation = ops[0].operation.conversation
        return [
            .prune,
            .operations(.init(isPush: true, operations: Array(ops[0...1]))),
            .stored([SlotRange(conversation: conversation, author: SyncFixtures.users[0], sequences: 1...2)]),
            .operations(.init(isPush: true, operations: Array(ops[2...3]))),
            .stored([SlotRange(conversation: conversation, author: SyncFixtures.users[0], sequences: 3...4)]),
        ]
    }

    @Test("messages go through the stream whole, and a repeated conversation and author cost a few bytes")
    func roundTrip() throws {
        let encoder = SyncStreamEncoder()
        let decoder = SyncStreamDecoder()
        var wireSizes: [Int] = []
        for message in try Self.messages() {
            let wire = encoder.encode(try message.payload())
            wireSizes.append(wire.readableBytes)
            #expect(try SyncMessage(payload: decoder.decode(wire)) == message)
        }
        #expect(wireSizes[0] == 1)  // PRUNE, too short to compress
        let plainStored = try Self.messages()[2].payload().readableBytes
        // STORED names a conversation (16 bytes) and an author (32) the OPERATIONS before it
        // held: less than half its plain 67 bytes travel.
        #expect(wireSizes[2] < plainStored / 2)
        #expect(wireSizes[4] < plainStored / 2)
    }

    @Test("a HAVE goes plain: its fingerprints and hashes never repeat, so compressing would grow it")
    func haveGoesPlain() throws {
        var random = ReconciliationRandom(seed: 7)
        let initiator = ReconciliationSet((0..<2_000).map { _ in (random.conversation(), random.digest()) })
        let responder = ReconciliationSet((0..<2_000).map { _ in (random.conversation(), random.digest()) })
        // The largest HAVE of a reconciliation between two sets that share nothing.
        let sides = [Reconciler(set: initiator), Reconciler(set: responder)]
        var message: HaveMessage? = sides[0].initiate()
        var largest = ByteBuffer()
        var turn = 1
        while let sent = message {
            let payload = try SyncMessage.have(sent).payload()
            if payload.readableBytes > largest.readableBytes { largest = payload }
            message = try sides[turn].respond(to: sent).reply
            turn = 1 - turn
        }
        let plain = largest
        #expect(plain.readableBytes >= SyncCompression.minimumPayloadByteCount)
        // Through the stream, as the first piece, it would grow by its frame and block headers.
        let piece = plain.withUnsafeReadableBytes { ZstdStreamCompressor(level: SyncCompression.level, windowLog: SyncCompression.windowLog).compress($0) }
        #expect(1 + piece.count > plain.readableBytes)
        let encoder = SyncStreamEncoder()
        #expect(encoder.encode(plain) == plain)
        // The stream still compresses what follows.
        let operations = try Self.messages()[1].payload()
        #expect(encoder.encode(operations).getInteger(at: 0, as: UInt8.self) == SyncMessageType.compressed.rawValue)
    }

    @Test("a COMPRESSED payload is not a message by itself")
    func bareCompressed() throws {
        let wire = SyncStreamEncoder().encode(try Self.messages()[1].payload())
        #expect(throws: SyncMessageError.self) { try SyncMessage(payload: wire) }
    }

    @Test("once refused, the stream stays refused (later pieces may refer to the lost one)")
    func broken() throws {
        let encoder = SyncStreamEncoder()
        let first = encoder.encode(try Self.messages()[1].payload())
        let second = encoder.encode(try Self.messages()[3].payload())
        let decoder = SyncStreamDecoder()
        var cut = first
        cut.moveWriterIndex(to: cut.writerIndex - 3)
        #expect(throws: SyncMessageError.self) { try decoder.decode(cut) }
        #expect(throws: SyncMessageError.self) { try decoder.decode(second) }
        // Plain payloads need no stream.
        #expect(try decoder.decode(SyncMessage.prune.payload()) == SyncMessage.prune.payload())
    }

    /// Writes `Protocol/vectors/sync-stream.json` again (WEFT_WRITE_STREAM_VECTORS=1): the
    /// compressed bytes are this zstd's choice, so the file changes only with the messages.
    @Test("write the vector file", .enabled(if: ProcessInfo.processInfo.environment["WEFT_WRITE_STREAM_VECTORS"] != nil))
    func writeVectors() throws {
        func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        let names = ["PRUNE: 1 byte, sent plain", "OPERATIONS (a creation and a message): the stream's first piece, with the frame header",
            "STORED naming the operations above: conversation and author are back-references",
            "OPERATIONS (two more messages of the conversation)", "STORED naming them"]
        let encoder = SyncStreamEncoder()
        var stream: [[String: Any]] = []
        var firstPiece: ByteBuffer?
        for (name, message) in zip(names, try Self.messages()) {
            let plain = try message.payload()
            let wire = encoder.encode(plain)
            if firstPiece == nil, wire != plain { firstPiece = wire }
            stream.append(["description": name, "plainHex": hex(plain.readableBytesView), "compressed": wire != plain, "wireHex": hex(wire.readableBytesView)])
        }
        func piece(_ bytes: [UInt8], windowLog: Int32 = SyncCompression.windowLog) -> String {
            "08" + hex(ZstdStreamCompressor(level: 1, windowLog: windowLog).compress(bytes))
        }
        var cut = firstPiece!
        cut.moveWriterIndex(to: cut.writerIndex - 3)
        let operations = Array(try Self.messages()[1].payload().readableBytesView)
        let invalid: [[String: Any]] = [
            ["description": "not zstd after the type byte", "wireHex": ["08" + hex(Array("not zstd".utf8))]],
            ["description": "the first piece less its last 3 bytes (a block cut short)", "wireHex": [hex(cut.readableBytesView)]],
            ["description": "a piece holding a COMPRESSED message", "wireHex": [piece([0x08] + operations)]],
            ["description": "a piece holding nothing", "wireHex": [piece([])]],
            ["description": "a frame asking for a window of 2^20 bytes", "wireHex": [piece(operations, windowLog: 20)]],
            ["description": "a piece that decodes to 1 byte more than a DATA payload", "wireHex": [piece([0x03] + [UInt8](repeating: 0, count: WireConstants.maxDataPayloadByteCount))]],
        ].map { entry in entry.merging(["error": "invalidCompression", "errorCode": 6]) { a, _ in a } }
        let file: [String: Any] = [
            "description": "Compressed sync streams (SPEC.md §14.11). \"stream\": one direction of a connection, in order: each step's plain sync message payload \"plainHex\", whether Weft's encoder compresses it, and the DATA payload \"wireHex\" it wrote (zstd encoders may choose other bytes; a decoder must give back \"plainHex\"). \"invalid\": DATA payloads in arrival order on a fresh connection; all but the last decode, the last is refused with \"error\" and ERROR \"errorCode\".",
            "windowLog": Int(SyncCompression.windowLog), "minimumPayloadByteCount": SyncCompression.minimumPayloadByteCount,
            "stream": stream, "invalid": invalid,
        ]
        let data = try JSONSerialization.data(withJSONObject: file, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/sync-stream.json")
        try (data + Data("\n".utf8)).write(to: url)
    }
}
