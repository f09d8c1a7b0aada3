import NIOCore
import Synchronization
import Testing
import WeftCrypto
import WeftDump
import WeftModel
import WeftSync
import WeftTransfer
import WeftWire

/// A key log that keeps what it is given.
final class KeptKeys: KeyLog {
    private let kept = Mutex<[KeyLogEntry]>([])
    var entries: [[UInt8]: KeyLogEntry] { kept.withLock { Dictionary($0.map { ($0.initiatorEphemeral, $0) }, uniquingKeysWith: { a, _ in a }) } }
    func record(_ entry: KeyLogEntry) { kept.withLock { $0.append(entry) } }
}

/// Two connection state machines joined in memory, each direction's bytes kept as a capture
/// would have them.
struct RecordedConnection {
    var initiator: ConnectionStateMachine
    var responder: ConnectionStateMachine
    var sent: (initiator: [UInt8], responder: [UInt8]) = ([], [])
    let keys = KeptKeys()
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let identities = (initiator: NodeIdentity.generate(), responder: NodeIdentity.generate())

    init() {
        let meshKey = MeshKey.generate()
        var configurations: [ConnectionStateMachine.Configuration] = []
        for (identity, name) in [(identities.initiator, "alice"), (identities.responder, "bob")] {
            var configuration = ConnectionStateMachine.Configuration(identity: identity, meshKey: meshKey, displayName: name)
            configuration.keyLog = keys
            configurations.append(configuration)
        }
        initiator = ConnectionStateMachine(role: .initiator, configuration: configurations[0])
        responder = ConnectionStateMachine(role: .responder, configuration: configurations[1])
        take(initiator.start(now: now), fromInitiator: true)
        take(responder.start(now: now), fromInitiator: false)
        run()
    }

    private var unread: (initiator: [UInt8], responder: [UInt8]) = ([], [])

    private mutating func take(_ actions: [ConnectionAction], fromInitiator: Bool) {
        for case .write(let buffer) in actions {
            if fromInitiator {
                sent.initiator += buffer.readableBytesView
                unread.initiator += buffer.readableBytesView
            } else {
                sent.responder += buffer.readableBytesView
                unread.responder += buffer.readableBytesView
            }
        }
    }

    /// Delivers until neither side has anything to say.
    mutating func run() {
        while !unread.initiator.isEmpty || !unread.responder.isEmpty {
            let toResponder = unread.initiator, toInitiator = unread.responder
            unread = ([], [])
            if !toResponder.isEmpty { take(responder.receive(ByteBuffer(bytes: toResponder), now: now), fromInitiator: false) }
            if !toInitiator.isEmpty { take(initiator.receive(ByteBuffer(bytes: toInitiator), now: now), fromInitiator: true) }
        }
    }

    mutating func send(_ payload: ByteBuffer, fromInitiator: Bool) {
        if fromInitiator {
            take(initiator.send(data: payload, now: now), fromInitiator: true)
        } else {
            take(responder.send(data: payload, now: now), fromInitiator: false)
        }
        run()
    }
}

/// An operation signed by `identity`: a conversation it creates.
func creation(by identity: NodeIdentity, sequence: UInt64 = 1) -> SignedOperation {
    let operation = Operation(
        author: identity.publicKey, conversation: ConversationID(bytes: [UInt8](repeating: UInt8(sequence), count: ConversationID.byteCount))!,
        sequence: sequence, timestamp: HLCTimestamp(milliseconds: 1_700_000_000_000, counter: 0), causes: [],
        body: .createConversation(participants: [identity.publicKey], distinct: false, generation: 0, metadata: ["title": "plans \(sequence)"]))
    return SignedOperation(signing: operation, with: identity)
}

/// Feeds each direction to a decoder in pieces of `piece` bytes, interleaved.
func decode(_ connection: RecordedConnection, keys: [[UInt8]: KeyLogEntry], piece: Int = .max) -> [DumpRecord] {
    let decoder = ConnectionDecoder(number: 1, keys: keys)
    var records: [DumpRecord] = []
    var offsets = (initiator: 0, responder: 0)
    while offsets.initiator < connection.sent.initiator.count || offsets.responder < connection.sent.responder.count {
        let a = min(connection.sent.initiator.count, offsets.initiator + piece)
        records += decoder.feed(fromInitiator: true, offset: UInt64(offsets.initiator), connection.sent.initiator[offsets.initiator..<a], time: 0)
        offsets.initiator = a
        let b = min(connection.sent.responder.count, offsets.responder + piece)
        records += decoder.feed(fromInitiator: false, offset: UInt64(offsets.responder), connection.sent.responder[offsets.responder..<b], time: 0)
        offsets.responder = b
    }
    return records
}

@Suite("weft dump: a connection's bytes decoded with the node's own decoders")
struct ConnectionDecoderTests {
    static func recorded() throws -> (RecordedConnection, [SignedOperation]) {
        var connection = RecordedConnection()
        let operations = (1...3).map { creation(by: connection.identities.initiator, sequence: $0) }
        let encoder = SyncStreamEncoder()
        // Plain, then compressed in the connection's zstd stream (long enough to be).
        connection.send(try SyncMessage.operations(.init(isPush: true, operations: [operations[0]])).payload(), fromInitiator: true)
        connection.send(encoder.encode(try SyncMessage.operations(.init(isPush: false, operations: Array(operations[1...]))).payload()), fromInitiator: true)
        connection.send(try SyncMessage.prune.payload(), fromInitiator: false)
        return (connection, operations)
    }

    @Test("with the key log: preambles, the handshake with each side's identity and name, and every frame, down to the operations in OPERATIONS, also through the zstd stream", arguments: [1, 13, Int.max])
    func withKeyLog(piece: Int) throws {
        let (connection, operations) = try Self.recorded()
        let records = decode(connection, keys: connection.keys.entries, piece: piece)
        #expect(records.filter { $0.kind == "preamble" }.count == 2)
        // Records come in the order the directions are fed; within a direction, in stream order.
        let handshakes = Dictionary(uniqueKeysWithValues: records.filter { $0.kind == "handshake" }.map { ($0["message"], $0) })
        #expect(handshakes.count == 3)
        #expect(handshakes[.integer(1)]?["keyLogEntry"] == .bool(true))
        #expect(handshakes[.integer(2)]?["displayName"] == .string("bob"))
        #expect(handshakes[.integer(2)]?["identity"] == .string("\(connection.identities.responder.publicKey)"))
        #expect(handshakes[.integer(3)]?["displayName"] == .string("alice"))
        #expect(handshakes[.integer(3)]?["identity"] == .string("\(connection.identities.initiator.publicKey)"))
        let frames = records.filter { $0.kind == "frame" }
        #expect(frames.first { $0.from == "responder" }?["type"] == .string("PING"), "the responder's confirmation")
        let data = frames.filter { $0["type"] == .string("DATA") && $0.from == "initiator" }
        #expect(data.map { $0["message"] } == [.string("OPERATIONS"), .string("OPERATIONS")])
        #expect(frames.filter { $0["type"] == .string("DATA") && $0.from == "responder" }.map { $0["message"] } == [.string("PRUNE")])
        #expect(data.map { $0["compressed"] } == [nil, .bool(true)])
        let decoded = data.flatMap { record -> [DumpValue] in
            guard case .list(let list)? = record["operations"] else { return [] }
            return list
        }
        let ids = decoded.compactMap { value -> String? in
            guard case .object(let fields) = value, case .string(let id)? = fields.first(where: { $0.name == "id" })?.value else { return nil }
            #expect(fields.contains(DumpField("signatureValid", .bool(true))))
            #expect(fields.contains(DumpField("kind", .string("createConversation"))))
            return id
        }
        #expect(ids == operations.map(\.id.hex))
        #expect(!records.contains { $0.kind == "problem" }, "\(records.filter { $0.kind == "problem" }.map(\.text))")
        // Each direction's records tile its stream: offsets and lengths add up.
        for side in ["initiator", "responder"] {
            let mine = records.filter { $0.from == side }
            #expect(zip(mine, mine.dropFirst()).allSatisfy { $0.offset + UInt64($0.length) == $1.offset })
            let total = side == "initiator" ? connection.sent.initiator.count : connection.sent.responder.count
            #expect(mine.last.map { $0.offset + UInt64($0.length) } == UInt64(total))
        }
    }

    @Test("without the key log: preambles, the handshake's structure and each record's length, and why no more is shown")
    func withoutKeyLog() throws {
        let (connection, _) = try Self.recorded()
        let records = decode(connection, keys: [:])
        #expect(records.filter { $0.kind == "preamble" }.count == 2)
        #expect(records.filter { $0.kind == "handshake" }.count == 3)
        #expect(!records.contains { $0.kind == "frame" })
        let sealed = records.filter { $0.kind == "record" }
        #expect(sealed.count >= 5)
        let notes = sealed.compactMap { record -> String? in if case .string(let note)? = record["note"] { note } else { nil } }
        #expect(notes.count == 2 && notes.allSatisfy { $0.contains("no key log was given") }, "once per direction: \(notes)")
    }

    @Test("damage: a flipped byte in a record ends that direction with a problem at its offset; a gap likewise; the other direction goes on")
    func damage() throws {
        var (connection, _) = try Self.recorded()
        let clean = decode(connection, keys: connection.keys.entries)
        let target = try #require(clean.last { $0.from == "initiator" && $0.kind == "frame" })
        connection.sent.initiator[Int(target.offset) + 9] ^= 0x20
        let damaged = decode(connection, keys: connection.keys.entries)
        let problem = try #require(damaged.first { $0.kind == "problem" })
        #expect(problem.offset == target.offset && problem.from == "initiator")
        #expect(damaged.filter { $0.from == "responder" }.map(\.offset) == clean.filter { $0.from == "responder" }.map(\.offset))

        // Bytes the capture lacks: said where they are; nothing after them is decoded.
        let decoder = ConnectionDecoder(number: 1, keys: connection.keys.entries)
        let bytes = connection.sent.initiator
        var records = decoder.feed(fromInitiator: true, offset: 0, bytes[..<200], time: 0)
        records += decoder.gap(fromInitiator: true, offset: 200, byteCount: 50, time: 0)
        records += decoder.feed(fromInitiator: true, offset: 250, bytes[250...], time: 0)
        #expect(records.last?.kind == "problem" && records.last?.offset == 200)
        #expect(!records.contains { $0.offset > 200 })
    }
}

@Suite("weft dump: chunks without their manifest in the capture")
struct ChunkWithoutManifestTests {
    @Test("a CHUNK whose MANIFEST the capture lacks shows the size its frame declares (compressed) or holds (raw), and says it could not check the hash")
    func declaredSizes() throws {
        var connection = RecordedConnection()
        let root = try #require(ContentRoot(bytes: [UInt8](repeating: 7, count: ContentRoot.byteCount)))
        let text = Array(String(repeating: "the same line again and again\n", count: 2_000).utf8)
        let random = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        let encoder = ChunkFrameEncoder()
        for (index, chunk) in [text, random].enumerated() {
            let frame = chunk.withUnsafeBytes { encoder.encode($0, mimeType: index == 0 ? "text/plain" : "image/jpeg") }
            connection.send(try SyncMessage.content(.chunk(ChunkMessage(root: root, index: UInt32(index), frame: frame))).payload(), fromInitiator: false)
        }
        let chunks = decode(connection, keys: connection.keys.entries).filter { $0["message"] == .string("CHUNK") }
        #expect(chunks.map { $0["compressed"] } == [.bool(true), .bool(false)])
        #expect(chunks.map { $0["declaredSize"] } == [.unsigned(UInt64(text.count)), .unsigned(UInt64(random.count))])
        #expect(chunks.allSatisfy { $0["hashCheck"] == .string("no manifest in the capture") })
    }
}
