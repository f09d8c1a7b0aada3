import Foundation
import NIOCore
import Synchronization
import Testing
import WeftCrypto
@testable import WeftWire

/// A key log that keeps what it is given.
final class RecordingKeyLog: KeyLog {
    private let recorded = Mutex<[KeyLogEntry]>([])
    var entries: [KeyLogEntry] { recorded.withLock { $0 } }
    func record(_ entry: KeyLogEntry) { recorded.withLock { $0.append(entry) } }
}

/// A captured direction of a connection, read as SPEC.md §2–§4 lay it out.
private struct CapturedStream {
    var bytes: ByteBuffer

    init(_ writes: [ByteBuffer]) {
        bytes = ByteBuffer()
        for var write in writes { bytes.writeBuffer(&write) }
    }

    mutating func preamble() -> [UInt8]? { bytes.readBytes(length: Preamble().bytes.count) }

    /// The next handshake record's Noise message (§3.2: a u16 length, then the message).
    mutating func handshakeMessage() -> [UInt8]? {
        guard let length = bytes.readInteger(as: UInt16.self) else { return nil }
        return bytes.readBytes(length: Int(length))
    }
}

/// Opens one sealed handshake field with what the key log says of it.
private func open(_ sealed: ArraySlice<UInt8>, with field: NoiseSessionSecrets.Field) throws -> [UInt8] {
    let cipher = CipherState(key: SecureBytes(copying: field.key))
    cipher.setNonce(field.nonce)
    return try cipher.decrypt(associatedData: field.associatedData, ciphertext: Array(sealed))
}

@Suite("ConnectionStateMachine: the key log (SPEC.md §18)")
struct ConnectionKeyLogTests {
    /// Rekeying after every 200 bytes, so the transport crosses several rekeys.
    static let policy = ChannelPolicy(
        pingInterval: .seconds(5), idleTimeout: .seconds(30), handshakeTimeout: .seconds(10),
        rekeyAfterBytes: 200, rekeyAfterTime: .minutes(60))

    @Test("both sides log the same secrets, and with them alone a capture of both directions decrypts: every handshake field, and every frame across rekeys")
    func secretsDecryptTheCapture() throws {
        let logs: [InMemoryLink.Side: RecordingKeyLog] = [.initiator: RecordingKeyLog(), .responder: RecordingKeyLog()]
        let meshKey = MeshKey.generate()
        var configurations: [InMemoryLink.Side: ConnectionStateMachine.Configuration] = [:]
        for side in InMemoryLink.Side.allCases {
            var configuration = ConnectionStateMachine.Configuration(
                identity: .generate(), meshKey: meshKey, displayName: InMemoryLink.displayNames[side]!, policy: Self.policy)
            configuration.keyLog = logs[side]
            configurations[side] = configuration
        }
        var link = InMemoryLink(initiator: configurations[.initiator]!, responder: configurations[.responder]!)
        link.establish()
        let texts = (0..<12).map { String(repeating: "message \($0) ", count: 1 + $0 * 3) }
        for (index, text) in texts.enumerated() {
            link.send(text, from: index.isMultiple(of: 2) ? .initiator : .responder)
            link.run()
        }

        let entry = try #require(logs[.initiator]!.entries.first)
        #expect(logs[.initiator]!.entries.count == 1 && logs[.responder]!.entries == [entry], "one entry, the same on both sides")
        #expect(entry.secrets.fields.count == 5, "message 1's payload, message 2's static key and payload, message 3's")

        var outbound = CapturedStream(link.writes[.initiator]!)
        var inbound = CapturedStream(link.writes[.responder]!)
        let preambles = [outbound.preamble(), inbound.preamble()]
        #expect(preambles.allSatisfy { $0 != nil })
        let first = outbound.handshakeMessage(), second = inbound.handshakeMessage(), third = outbound.handshakeMessage()
        let message1 = try #require(first), message2 = try #require(second), message3 = try #require(third)
        #expect(Array(message1.prefix(32)) == entry.initiatorEphemeral, "the entry is named by message 1's ephemeral key")

        let fields = entry.secrets.fields
        #expect(try open(message1.dropFirst(32), with: fields[0]).isEmpty)
        let responderStatic = try open(message2[32..<80], with: fields[1])
        #expect(responderStatic.count == 32)
        #expect(try NodeInfo(bytes: open(message2.dropFirst(80), with: fields[2])) == link.expectedInfo(of: .responder))
        #expect(try open(message3.prefix(48), with: fields[3]).count == 32)
        #expect(try NodeInfo(bytes: open(message3.dropFirst(48), with: fields[4])) == link.expectedInfo(of: .initiator))

        // The transport: a codec keyed from the log opens each direction to its end.
        for (stream, key, receiver) in [
            (outbound, entry.secrets.initiatorToResponder, InMemoryLink.Side.responder),
            (inbound, entry.secrets.responderToInitiator, .initiator),
        ] {
            var bytes = stream.bytes
            let codec = TransportCodec(send: CipherState(key: SecureBytes(copying: key)), receive: CipherState(key: SecureBytes(copying: key)))
            var data: [String] = []
            var rekeys = 0
            while bytes.readableBytes > 0 {
                let opened = try codec.open(from: &bytes)
                let frame = try #require(opened, "a whole record at offset \(bytes.readerIndex)")
                switch frame {
                case .data(let payload): data.append(String(buffer: payload))
                case .rekey: rekeys += 1
                default: break
                }
            }
            #expect(data == link.received(receiver), "toward the \(receiver)")
            #expect(rekeys >= 2, "toward the \(receiver): \(rekeys) rekeys crossed")
        }
    }

    @Test("the handshake vector's connection replayed with key logs: both sides log the vector's transport keys, and each field's secrets open the vector's sealed field to what the vector says it holds")
    func handshakeVector() throws {
        let vector = try WireVectorFile.load("handshake.json", as: HandshakeVector.self)
        var replay = HandshakeReplay(vector, live: [])
        var logs: [String: RecordingKeyLog] = [:]
        for side in ["initiator", "responder"] {
            var configuration = vector.configuration(side)
            let log = RecordingKeyLog()
            configuration.keyLog = log
            logs[side] = log
            replay.machines[side] = ConnectionStateMachine(
                role: side == "initiator" ? .initiator : .responder, configuration: configuration,
                fixedEphemeral: vector.party(side).ephemeral)
        }
        replay.run()

        let entry = try #require(logs["initiator"]!.entries.first)
        #expect(logs["initiator"]!.entries.count == 1 && logs["responder"]!.entries == [entry])
        #expect(WireVectorFile.hex(entry.secrets.initiatorToResponder) == vector.transportKeys.initiatorToResponder)
        #expect(WireVectorFile.hex(entry.secrets.responderToInitiator) == vector.transportKeys.responderToInitiator)
        #expect(WireVectorFile.hex(entry.initiatorEphemeral) == vector.initiator.ephemeralPublic)

        var messages: [Int: (message: [UInt8], payload: [UInt8])] = [:]
        for record in vector.steps.flatMap(\.records) where record.layer == "handshake" {
            messages[try #require(record.message)] = (
                Array(WireVectorFile.bytes(record.hex).dropFirst(2)), WireVectorFile.bytes(try #require(record.payloadHex))
            )
        }
        let (message1, payload1) = try #require(messages[1])
        let (message2, payload2) = try #require(messages[2])
        let (message3, payload3) = try #require(messages[3])
        let fields = entry.secrets.fields
        try #require(fields.count == 5)
        #expect(try open(message1.dropFirst(32), with: fields[0]) == payload1)
        #expect(WireVectorFile.hex(try open(message2[32..<80], with: fields[1])) == vector.responder.x25519StaticPublic)
        #expect(try open(message2.dropFirst(80), with: fields[2]) == payload2)
        #expect(WireVectorFile.hex(try open(message3.prefix(48), with: fields[3])) == vector.initiator.x25519StaticPublic)
        #expect(try open(message3.dropFirst(48), with: fields[4]) == payload3)

        // The lines as Protocol/vectors/handshake.keylog has them (weft dump's golden outputs
        // read it); WEFT_WRITE_VECTORS=1 writes the file.
        let text = entry.lines.joined(separator: "\n") + "\n"
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/handshake.keylog")
        if ProcessInfo.processInfo.environment["WEFT_WRITE_VECTORS"] == "1" { try text.write(to: file, atomically: true, encoding: .utf8) }
        #expect(try String(contentsOf: file, encoding: .utf8) == text)
    }

    @Test("key log text reads back into the entries it was written from; comments, blank lines and unknown labels are skipped, a damaged line is named by its number")
    func parse() throws {
        let field = { (byte: UInt8, nonce: UInt64) in
            NoiseSessionSecrets.Field(key: [UInt8](repeating: byte, count: 32), nonce: nonce, associatedData: [UInt8](repeating: ~byte, count: 64))
        }
        let entries = (1...2).map { (n: UInt8) in
            KeyLogEntry(
                initiatorEphemeral: [UInt8](repeating: n, count: 32),
                secrets: NoiseSessionSecrets(
                    fields: (0..<5).map { field(n &* 16 &+ UInt8($0), UInt64($0 % 2)) }, initiatorToResponder: [UInt8](repeating: 0xa0 + n, count: 32),
                    responderToInitiator: [UInt8](repeating: 0xb0 + n, count: 32)))
        }
        var lines = ["# written by a test", ""] + entries[0].lines + ["SOMETHING_NEWER ab cd"] + entries[1].lines
        lines.insert("WEFT_TRANSPORT 12 34", at: 4)
        let (parsed, problems) = KeyLogEntry.parse(lines.joined(separator: "\n") + "\n")
        #expect(parsed == [entries[0].initiatorEphemeral: entries[0], entries[1].initiatorEphemeral: entries[1]])
        #expect(problems.map(\.line) == [5])
    }

    @Test("the entry as key log lines: one per handshake field, then the transport keys, in lowercase hex")
    func lines() throws {
        let field = { (byte: UInt8, nonce: UInt64) in
            NoiseSessionSecrets.Field(key: [UInt8](repeating: byte, count: 32), nonce: nonce, associatedData: [byte, 0xff])
        }
        let entry = KeyLogEntry(
            initiatorEphemeral: [0xab, 0x01],
            secrets: NoiseSessionSecrets(
                fields: [field(1, 0), field(2, 1)], initiatorToResponder: [0x0a, 0x0b], responderToInitiator: [0xc0]))
        let one = String(repeating: "01", count: 32), two = String(repeating: "02", count: 32)
        #expect(entry.lines == [
            "WEFT_HANDSHAKE_FIELD ab01 0 \(one) 0 01ff",
            "WEFT_HANDSHAKE_FIELD ab01 1 \(two) 1 02ff",
            "WEFT_TRANSPORT ab01 0a0b c0",
        ])
    }
}
