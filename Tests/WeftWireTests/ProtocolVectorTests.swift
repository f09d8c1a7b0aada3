import Foundation
import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

// Golden vectors from Protocol/vectors/ (SPEC.md), checked in both directions: what this
// implementation writes must be exactly the vector's bytes, and the vector's bytes must read as
// the vector's meaning. See Protocol/vectors/README.md for the file format.

// MARK: - Loading

/// Reads and decodes the vector files, and converts hex. Names are specific to this file so they
/// cannot clash with helpers elsewhere in the test target.
enum WireVectorFile {
    /// The one loader for every vector file: `Protocol/vectors/<name>` decoded as `File`.
    static func load<File: Decodable>(_ name: String, as type: File.Type = File.self) throws -> File {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // WeftWireTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package
            .appendingPathComponent("Protocol/vectors/\(name)")
        return try JSONDecoder().decode(File.self, from: Data(contentsOf: url))
    }

    static func bytes(_ hex: String) -> [UInt8] {
        precondition(hex.utf8.count % 2 == 0, "odd-length hex in a vector file")
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var chars = hex.utf8.makeIterator()
        while let hi = chars.next(), let lo = chars.next() {
            bytes.append(UInt8(String(decoding: [hi, lo], as: UTF8.self), radix: 16)!)
        }
        return bytes
    }

    static func buffer(_ hex: String) -> ByteBuffer { ByteBuffer(bytes: bytes(hex)) }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    static func hex(_ buffer: ByteBuffer) -> String { hex(buffer.readableBytesView) }
}

/// A frame's decoded meaning as the vector files write it.
struct VectorFrame: Decodable, Sendable, Equatable {
    let type: String
    /// PING and PONG: the u64 value, in decimal.
    let value: String?
    /// CLOSE and ERROR.
    let code: UInt16?
    let text: String?
    /// DATA.
    let payloadHex: String?

    var frame: Frame {
        switch type {
        case "PING": .ping(UInt64(value!)!)
        case "PONG": .pong(UInt64(value!)!)
        case "CLOSE": .close(CloseCode(rawValue: code!), text!)
        case "ERROR": .error(ErrorCode(rawValue: code!), text!)
        case "REKEY": .rekey
        case "DATA": .data(WireVectorFile.buffer(payloadHex!))
        default: preconditionFailure("unknown frame type \(type) in a vector file")
        }
    }
}

/// How a vector says a connection ends.
struct VectorEnd: Decodable, Sendable {
    let kind: String
    let detail: String?

    var connectionEndKind: ConnectionEnd.Kind {
        switch kind {
        case "localClose": .localClose
        case "peerClosed": .peerClosed
        case "peerReportedError": .peerReportedError
        case "protocolViolation": .protocolViolation
        case "versionMismatch": .versionMismatch
        case "handshakeFailed": .handshakeFailed
        case "timeout": .timeout
        case "connectionLost": .connectionLost
        default: preconditionFailure("unknown connection end \(kind) in a vector file")
        }
    }
}

// MARK: - File layouts

struct PreambleVectors: Decodable, Sendable {
    struct Entry: Decodable, Sendable, CustomTestStringConvertible {
        let description: String
        let hex: String
        let version: UInt16
        let reserved: UInt16
        let encode: Bool
        let end: VectorEnd?
        var testDescription: String { description }
    }
    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        let description: String
        let hex: String
        let end: VectorEnd
        var testDescription: String { description }
    }
    let preambles: [Entry]
    let invalid: [Invalid]
}

struct FrameVectors: Decodable, Sendable {
    struct Entry: Decodable, Sendable, CustomTestStringConvertible {
        let description: String
        let hex: String
        let frame: VectorFrame
        var testDescription: String { description }
    }
    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        let description: String
        let hex: String
        /// The ERROR code; for record headers, nil means "acceptable: wait for the body".
        let errorCode: UInt16?
        var testDescription: String { description }
    }
    let frames: [Entry]
    let invalid: [Invalid]
    let recordHeaders: [Invalid]
}

struct HandshakeVector: Decodable, Sendable {
    struct Party: Decodable, Sendable {
        struct Info: Decodable, Sendable {
            let protocolVersion: UInt16
            let features: String
            let identity: String
            let displayName: String
            let listenPort: UInt16?

            var value: NodeInfo {
                NodeInfo(
                    identity: try! PublicIdentity(bytes: WireVectorFile.bytes(identity)), displayName: displayName,
                    protocolVersion: protocolVersion, features: UInt64(features)!, listenPort: listenPort)
            }
        }
        let ed25519Seed: String
        let ed25519PublicKey: String
        let x25519StaticPrivate: String
        let x25519StaticPublic: String
        let ephemeralPrivate: String
        let ephemeralPublic: String
        let displayName: String
        let nodeInfoHex: String
        let nodeInfo: Info

        var identity: NodeIdentity { NodeIdentity(seed: SecureBytes(copying: WireVectorFile.bytes(ed25519Seed))) }
        var ephemeral: X25519KeyPair { X25519KeyPair(privateKey: SecureBytes(copying: WireVectorFile.bytes(ephemeralPrivate))) }
        var expectedNodeInfo: NodeInfo {
            NodeInfo(
                identity: try! PublicIdentity(bytes: WireVectorFile.bytes(nodeInfo.identity)),
                displayName: nodeInfo.displayName, protocolVersion: nodeInfo.protocolVersion,
                features: UInt64(nodeInfo.features)!)
        }
    }
    struct Policy: Decodable, Sendable { let rekeyAfterSeconds: Int64 }
    struct Keys: Decodable, Sendable {
        let initiatorToResponder: String
        let responderToInitiator: String
    }
    /// Node info payloads (§3.3) beyond the two parties': the listen port, and what a reader
    /// ignores. `nodeInfo`, when present, encodes to `hex`; `hex` decodes to `decodesTo`.
    struct NodeInfoExample: Decodable, Sendable {
        let description: String
        let nodeInfo: Party.Info?
        let hex: String
        let decodesTo: Party.Info
    }
    let nodeInfoExamples: [NodeInfoExample]
    struct Record: Decodable, Sendable {
        /// "preamble", "handshake" or "transport".
        let layer: String
        let hex: String
        let version: UInt16?
        /// Handshake message number (1...3) and its decrypted payload.
        let message: Int?
        let payloadHex: String?
        /// Transport records: the nonce they were sealed with, and the frame inside.
        let nonce: UInt64?
        let frameHex: String?
        let frame: VectorFrame?
    }
    struct Action: Decodable, Sendable {
        let kind: String
        /// `authenticated`: which party was authenticated.
        let peer: String?
        /// `data`: the payload.
        let hex: String?
        /// `close`: the connection end kind.
        let end: String?
    }
    struct Step: Decodable, Sendable {
        let description: String
        let side: String
        let event: String
        let atSeconds: Int64
        let sendHex: String?
        let closeCode: UInt16?
        let closeReason: String?
        let writes: String
        let records: [Record]
        let actions: [Action]
    }

    let protocolName: String
    let meshKey: String
    let initiator: Party
    let responder: Party
    let initiatorPolicy: Policy
    let prologue: String
    let handshakeHash: String
    let transportKeys: Keys
    let steps: [Step]

    func party(_ side: String) -> Party { side == "initiator" ? initiator : responder }

    func configuration(_ side: String, meshKey: String? = nil) -> ConnectionStateMachine.Configuration {
        let party = party(side)
        let policy = side == "initiator"
            ? ChannelPolicy(rekeyAfterTime: .seconds(initiatorPolicy.rekeyAfterSeconds)) : ChannelPolicy.default
        return ConnectionStateMachine.Configuration(
            identity: party.identity,
            meshKey: MeshKey(secret: SecureBytes(copying: WireVectorFile.bytes(meshKey ?? self.meshKey))),
            displayName: party.displayName, policy: policy)
    }

    func machine(_ side: String, meshKey: String? = nil) -> ConnectionStateMachine {
        ConnectionStateMachine(
            role: side == "initiator" ? .initiator : .responder, configuration: configuration(side, meshKey: meshKey),
            fixedEphemeral: party(side).ephemeral)
    }
}

// MARK: - Replaying the handshake vector

/// Runs the handshake vector's steps. Sides in `machines` are real state machines; a side
/// without one is played from the file, its writes taken from the vector. Either way a live
/// side's writes and actions are compared with the vector's.
struct HandshakeReplay {
    let vector: HandshakeVector
    var machines: [String: ConnectionStateMachine]
    /// Bytes each side wrote that the other has not read yet.
    var unread: [String: [UInt8]] = ["initiator": [], "responder": []]
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    init(_ vector: HandshakeVector, live sides: [String]) {
        self.vector = vector
        machines = Dictionary(uniqueKeysWithValues: sides.map { ($0, vector.machine($0)) })
    }

    /// Runs `vector.steps[range]` (all of them by default), checking each live side's writes and actions.
    mutating func run(_ range: Range<Int>? = nil) {
        for index in range ?? vector.steps.indices {
            let step = vector.steps[index]
            guard var machine = machines[step.side] else {
                unread[step.side, default: []] += WireVectorFile.bytes(step.writes)
                continue
            }
            let actions = perform(step, on: &machine)
            machines[step.side] = machine
            var written: [UInt8] = []
            var others: [ConnectionAction] = []
            for action in actions {
                if case .write(let buffer) = action { written += buffer.readableBytesView } else { others.append(action) }
            }
            #expect(WireVectorFile.hex(written) == step.writes, "step \(index) (\(step.side)): \(step.description)")
            unread[step.side, default: []] += written
            check(others, against: step, index: index)
        }
    }

    mutating func perform(_ step: HandshakeVector.Step, on machine: inout ConnectionStateMachine) -> [ConnectionAction] {
        let now = Self.start + .seconds(step.atSeconds)
        let other = step.side == "initiator" ? "responder" : "initiator"
        switch step.event {
        case "start":
            return machine.start(now: now)
        case "receive":
            let bytes = unread[other, default: []]
            unread[other] = []
            return machine.receive(ByteBuffer(bytes: bytes), now: now)
        case "send":
            return machine.send(data: WireVectorFile.buffer(step.sendHex!), now: now)
        case "tick":
            return machine.tick(now: now)
        case "close":
            return machine.close(CloseCode(rawValue: step.closeCode!), reason: step.closeReason!, now: now)
        default:
            preconditionFailure("unknown event \(step.event) in the handshake vector")
        }
    }

    func check(_ actions: [ConnectionAction], against step: HandshakeVector.Step, index: Int) {
        let context = "step \(index) (\(step.side)): \(step.description)"
        #expect(actions.count == step.actions.count, "\(context): \(actions)")
        for (action, expected) in zip(actions, step.actions) {
            switch (action, expected.kind) {
            case (.authenticated(let info), "authenticated"):
                #expect(info == vector.party(expected.peer!).expectedNodeInfo, "\(context)")
            case (.data(let bytes), "data"):
                #expect(WireVectorFile.hex(bytes) == expected.hex, "\(context)")
            case (.close(let end), "close"):
                #expect(end.kind == VectorEnd(kind: expected.end!, detail: nil).connectionEndKind, "\(context): \(end)")
            default:
                Issue.record("\(context): \(action) where the vector has \(expected.kind)")
            }
        }
    }
}

// MARK: - Tests

@Suite("Protocol vectors: preamble (SPEC.md §2)")
struct PreambleVectorTests {
    @Test("each preamble decodes to its fields, and version 1 encodes to its bytes",
          arguments: try WireVectorFile.load("preamble.json", as: PreambleVectors.self).preambles)
    func preamble(_ entry: PreambleVectors.Entry) throws {
        let bytes = WireVectorFile.bytes(entry.hex)
        var buffer = ByteBuffer(bytes: bytes)
        #expect(try Preamble.read(from: &buffer) == Preamble(version: entry.version, reserved: entry.reserved))
        #expect(buffer.readableBytes == 0)
        if entry.encode {
            #expect(WireVectorFile.hex(Preamble().bytes) == entry.hex)
            #expect(Preamble(version: entry.version, reserved: entry.reserved).bytes == bytes)
        }
        // One byte short: need more, nothing consumed.
        var short = ByteBuffer(bytes: bytes.dropLast())
        #expect(try Preamble.read(from: &short) == nil)
        #expect(short.readableBytes == bytes.count - 1)
    }

    @Test("a node ends the connection on a preamble it refuses, and otherwise goes on",
          arguments: try WireVectorFile.load("preamble.json", as: PreambleVectors.self).preambles)
    func stateMachine(_ entry: PreambleVectors.Entry) throws {
        let vector = try WireVectorFile.load("handshake.json", as: HandshakeVector.self)
        for side in ["initiator", "responder"] {
            var machine = vector.machine(side)
            _ = machine.start(now: HandshakeReplay.start)
            let actions = machine.receive(WireVectorFile.buffer(entry.hex), now: HandshakeReplay.start)
            if let end = entry.end {
                #expect(actions.count == 1, "\(side): no write, just the close")
                guard case .close(let connectionEnd) = actions.first else {
                    Issue.record("\(side): \(actions)")
                    continue
                }
                #expect(connectionEnd.kind == end.connectionEndKind)
                if let detail = end.detail { #expect(connectionEnd.detail == detail) }
                #expect(machine.isClosed)
            } else {
                #expect(!machine.isClosed, "\(side)")
                // The initiator answers the responder's preamble with handshake message 1.
                #expect(actions.count == (side == "initiator" ? 1 : 0), "\(side): \(actions)")
            }
        }
    }

    @Test("a stream that does not start with \"WEFT\" is refused",
          arguments: try WireVectorFile.load("preamble.json", as: PreambleVectors.self).invalid)
    func invalid(_ entry: PreambleVectors.Invalid) throws {
        var buffer = WireVectorFile.buffer(entry.hex)
        #expect(throws: WeftWireError.self) { try Preamble.read(from: &buffer) }

        let vector = try WireVectorFile.load("handshake.json", as: HandshakeVector.self)
        var machine = vector.machine("responder")
        _ = machine.start(now: HandshakeReplay.start)
        let actions = machine.receive(WireVectorFile.buffer(entry.hex), now: HandshakeReplay.start)
        guard actions.count == 1, case .close(let end) = actions[0] else {
            Issue.record("expected only a close: \(actions)")
            return
        }
        #expect(end.kind == entry.end.connectionEndKind)
    }
}

@Suite("Protocol vectors: frames and record headers (SPEC.md §4, §5)")
struct FrameVectorTests {
    @Test("each frame encodes to its bytes and decodes to its meaning",
          arguments: try WireVectorFile.load("frames.json", as: FrameVectors.self).frames)
    func frame(_ entry: FrameVectors.Entry) throws {
        let expected = entry.frame.frame
        var written = ByteBuffer()
        let count = expected.write(to: &written)
        #expect(WireVectorFile.hex(written) == entry.hex)
        #expect(count == written.readableBytes)
        #expect(expected.encodedByteCount == written.readableBytes)
        #expect(try Frame.read(from: WireVectorFile.buffer(entry.hex)) == expected)
    }

    @Test("each invalid frame is refused with its ERROR code",
          arguments: try WireVectorFile.load("frames.json", as: FrameVectors.self).invalid)
    func invalidFrame(_ entry: FrameVectors.Invalid) {
        do {
            let frame = try Frame.read(from: WireVectorFile.buffer(entry.hex))
            Issue.record("decoded \(frame)")
        } catch {
            #expect(error.code.rawValue == entry.errorCode)
        }
    }

    @Test("record lengths are checked before the body is awaited",
          arguments: try WireVectorFile.load("frames.json", as: FrameVectors.self).recordHeaders)
    func recordHeader(_ entry: FrameVectors.Invalid) {
        let key = SecureBytes(copying: [UInt8](repeating: 7, count: CipherState.keyByteCount))
        let codec = TransportCodec(send: CipherState(key: key), receive: CipherState(key: key))
        var buffer = WireVectorFile.buffer(entry.hex)
        do {
            let frame = try codec.open(from: &buffer)
            #expect(entry.errorCode == nil, "accepted a length the vector refuses")
            #expect(frame == nil, "only the header is there")
            #expect(buffer.readableBytes == 4, "nothing consumed while waiting")
        } catch {
            #expect(error.code.rawValue == entry.errorCode)
        }
    }
}

@Suite("Protocol vectors: a whole connection (SPEC.md §2-§8)")
struct HandshakeVectorTests {
    let vector: HandshakeVector

    init() throws {
        vector = try WireVectorFile.load("handshake.json", as: HandshakeVector.self)
    }

    @Test("the fixed keys derive the vector's public keys and node info")
    func keys() throws {
        #expect(vector.protocolName == WireConstants.noiseProtocolName)
        for party in [vector.initiator, vector.responder] {
            let identity = party.identity
            #expect(WireVectorFile.hex(identity.publicKey.bytes) == party.ed25519PublicKey)
            #expect(WireVectorFile.hex(identity.agreementKeyPair().publicKey) == party.x25519StaticPublic)
            #expect(try WireVectorFile.hex(identity.publicKey.agreementPublicKey()) == party.x25519StaticPublic)
            #expect(X25519KeyPair(privateKey: SecureBytes(copying: WireVectorFile.bytes(party.x25519StaticPrivate)))
                .publicKey == WireVectorFile.bytes(party.x25519StaticPublic))
            #expect(WireVectorFile.hex(party.ephemeral.publicKey) == party.ephemeralPublic)
            let info = NodeInfo(identity: identity.publicKey, displayName: party.displayName)
            #expect(WireVectorFile.hex(info.bytes) == party.nodeInfoHex)
            #expect(try NodeInfo(bytes: WireVectorFile.bytes(party.nodeInfoHex)) == party.expectedNodeInfo)
        }
        #expect(vector.prologue == WireVectorFile.hex(Preamble().bytes + Preamble().bytes))
    }

    @Test("node info with a listen port encodes to the vectors' bytes, and readers ignore what they must")
    func nodeInfoExamples() throws {
        #expect(vector.nodeInfoExamples.count == 4)
        for example in vector.nodeInfoExamples {
            if let info = example.nodeInfo { #expect(WireVectorFile.hex(info.value.bytes) == example.hex, "\(example.description)") }
            #expect(try NodeInfo(bytes: WireVectorFile.bytes(example.hex)) == example.decodesTo.value, "\(example.description)")
        }
    }

    @Test("an Ed25519 key and its negation (sign bit flipped) convert to the same X25519 key (SPEC.md §3.4)")
    func negatedKeyAlias() throws {
        var negated = WireVectorFile.bytes(vector.initiator.ed25519PublicKey)
        negated[31] ^= 0x80
        let alias = try PublicIdentity(bytes: negated)
        #expect(alias != vector.initiator.identity.publicKey)
        #expect(try WireVectorFile.hex(alias.agreementPublicKey()) == vector.initiator.x25519StaticPublic)
    }

    @Test("two state machines write exactly the vector's bytes")
    func pair() {
        var replay = HandshakeReplay(vector, live: ["initiator", "responder"])
        replay.run()
        #expect(replay.machines["initiator"]!.isClosed)
        #expect(replay.machines["responder"]!.isClosed)
    }

    @Test("a responder fed the initiator's bytes authenticates it, answers as the vector does and reads the DATA")
    func responderAlone() {
        var replay = HandshakeReplay(vector, live: ["responder"])
        replay.run()
        #expect(replay.machines["responder"]!.isClosed)
    }

    @Test("an initiator fed the responder's bytes authenticates it, answers as the vector does and reads the DATA")
    func initiatorAlone() {
        var replay = HandshakeReplay(vector, live: ["initiator"])
        replay.run()
        #expect(replay.machines["initiator"]!.isClosed)
    }

    @Test("every record opens with plain Noise: handshake hash, transport keys, nonces and frames")
    func records() throws {
        let prologue = WireVectorFile.bytes(vector.prologue)
        func handshake(_ side: String) throws -> NoiseHandshake {
            let party = vector.party(side)
            return try NoiseHandshake(
                protocolName: vector.protocolName, role: side == "initiator" ? .initiator : .responder,
                prologue: prologue, localStatic: party.identity.agreementKeyPair(),
                preSharedKeys: [SecureBytes(copying: WireVectorFile.bytes(vector.meshKey))],
                fixedEphemeral: party.ephemeral)
        }
        var noise = ["initiator": try handshake("initiator"), "responder": try handshake("responder")]
        func key(_ hex: String) -> CipherState { CipherState(key: SecureBytes(copying: WireVectorFile.bytes(hex))) }
        // Readers use the vector's transport keys; writers use their own split() ciphers.
        let readers = [
            "initiator": key(vector.transportKeys.initiatorToResponder),
            "responder": key(vector.transportKeys.responderToInitiator),
        ]
        var writers: [String: CipherState] = [:]

        for step in vector.steps {
            let other = step.side == "initiator" ? "responder" : "initiator"
            #expect(step.records.map(\.hex).joined() == step.writes, "\(step.description)")
            for record in step.records {
                let bytes = WireVectorFile.bytes(record.hex)
                switch record.layer {
                case "preamble":
                    var buffer = ByteBuffer(bytes: bytes)
                    #expect(try Preamble.read(from: &buffer)?.version == record.version)
                case "handshake":
                    #expect(Int(UInt16(bytes[0]) << 8 | UInt16(bytes[1])) == bytes.count - 2, "u16 length prefix")
                    let message = Array(bytes.dropFirst(2))
                    let payload = WireVectorFile.bytes(record.payloadHex!)
                    #expect(try noise[step.side]!.writeMessage(payload: payload) == message, "message \(record.message!)")
                    #expect(try noise[other]!.readMessage(message) == payload, "message \(record.message!)")
                    if record.message == 3 {
                        for side in ["initiator", "responder"] {
                            #expect(noise[side]!.isComplete)
                            #expect(WireVectorFile.hex(noise[side]!.handshakeHash) == vector.handshakeHash)
                            writers[side] = noise[side]!.split().send
                        }
                        #expect(noise["responder"]!.remoteStaticKey == WireVectorFile.bytes(vector.initiator.x25519StaticPublic))
                        #expect(noise["initiator"]!.remoteStaticKey == WireVectorFile.bytes(vector.responder.x25519StaticPublic))
                    }
                case "transport":
                    #expect(Int(UInt32(bytes[0]) << 24 | UInt32(bytes[1]) << 16 | UInt32(bytes[2]) << 8 | UInt32(bytes[3]))
                        == bytes.count - 4, "u32 length prefix")
                    let frameBytes = WireVectorFile.bytes(record.frameHex!)
                    #expect(readers[step.side]!.nonce == record.nonce)
                    #expect(writers[step.side]!.nonce == record.nonce)
                    let sealed = try writers[step.side]!.encrypt(associatedData: [], plaintext: frameBytes)
                    #expect(sealed == Array(bytes.dropFirst(4)), "\(step.description)")
                    let opened = try readers[step.side]!.decrypt(associatedData: [], ciphertext: Array(bytes.dropFirst(4)))
                    #expect(opened == frameBytes, "\(step.description)")
                    let frame = try Frame.read(from: ByteBuffer(bytes: opened))
                    #expect(frame == record.frame!.frame)
                    if case .rekey = frame {
                        readers[step.side]!.rekey()
                        writers[step.side]!.rekey()
                    }
                default:
                    Issue.record("unknown record layer \(record.layer)")
                }
            }
        }
    }

    @Test("a responder with another mesh key still writes message 2 (psk3 guards message 3 on), then refuses message 3")
    func wrongMeshKey() throws {
        let otherKey = String(repeating: "ab", count: MeshKey.byteCount)
        var responder = vector.machine("responder", meshKey: otherKey)
        var initiator = vector.machine("initiator")
        let start = HandshakeReplay.start
        let steps = vector.steps
        func written(_ actions: [ConnectionAction]) -> String {
            actions.map { if case .write(let b) = $0 { WireVectorFile.hex(b) } else { "" } }.joined()
        }
        // Steps 0-5 of the vector: preambles, messages 1-3.
        _ = initiator.start(now: start)
        #expect(written(responder.start(now: start)) == steps[1].writes)
        #expect(written(initiator.receive(WireVectorFile.buffer(steps[1].writes), now: start)) == steps[3].writes)
        let message2 = responder.receive(WireVectorFile.buffer(steps[0].writes + steps[3].writes), now: start)
        #expect(written(message2) == steps[4].writes, "message 2 does not depend on the mesh key")
        #expect(written(initiator.receive(WireVectorFile.buffer(steps[4].writes), now: start)) == steps[5].writes)

        let refusal = responder.receive(WireVectorFile.buffer(steps[5].writes), now: start)
        guard refusal.count == 1, case .close(let end) = refusal[0] else {
            Issue.record("expected only a close: \(refusal)")
            return
        }
        #expect(end.kind == .handshakeFailed)
        #expect(end.detail.contains("different mesh key"))
        // The responder closes the TCP connection without a word; the initiator learns why.
        let initiatorEnd = initiator.connectionClosed()
        #expect(initiatorEnd?.kind == .handshakeFailed)
        #expect(initiatorEnd?.detail
            == "the peer rejected our final handshake message: it most likely uses a different mesh key")
        #expect(initiator.peer == nil)
    }

    @Test("a tampered transport record gets an ERROR (decryption failed) sealed with the still-good cipher, then a close")
    func tamperedRecord() throws {
        guard let dataStep = vector.steps.firstIndex(where: { $0.side == "initiator" && $0.event == "send" }) else {
            Issue.record("the vector has no DATA from the initiator")
            return
        }
        var replay = HandshakeReplay(vector, live: ["responder"])
        replay.run(0..<dataStep)
        var record = WireVectorFile.bytes(vector.steps[dataStep].writes)
        record[record.count - 1] ^= 0x01
        var responder = replay.machines["responder"]!
        let actions = responder.receive(ByteBuffer(bytes: replay.unread["initiator"]! + record), now: HandshakeReplay.start)
        guard actions.count == 2, case .write(let errorRecord) = actions[0], case .close(let end) = actions[1] else {
            Issue.record("expected a write and a close: \(actions)")
            return
        }
        #expect(end.kind == .protocolViolation)
        // The responder has sealed one record (PING 0), so its ERROR uses nonce 1.
        let reader = CipherState(key: SecureBytes(copying: WireVectorFile.bytes(vector.transportKeys.responderToInitiator)))
        reader.setNonce(1)
        let ciphertext = Array(errorRecord.readableBytesView.dropFirst(4))
        let frame = try Frame.read(from: ByteBuffer(bytes: reader.decrypt(associatedData: [], ciphertext: ciphertext)))
        guard case .error(let code, _) = frame else {
            Issue.record("expected ERROR, got \(frame)")
            return
        }
        #expect(code == .decryptionFailed)
    }
}
