import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

/// One `ConnectionStateMachine` against a peer built by hand from `NoiseHandshake` and
/// `TransportCodec`, following the wire layout byte by byte. This checks the machine speaks the
/// protocol as written (not just to itself), and lets the peer lie about its identity.
@Suite("ConnectionStateMachine: against a hand-built peer")
struct ConnectionRawPeerTests {
    static let now = NIODeadline.uptimeNanoseconds(7_000_000_000)
    static let meshKey = MeshKey.generate()

    static func machine(_ role: ConnectionStateMachine.Role, identity: NodeIdentity = .generate()) -> ConnectionStateMachine {
        ConnectionStateMachine(
            role: role, configuration: .init(identity: identity, meshKey: meshKey, displayName: "machine"))
    }

    static func written(_ actions: [ConnectionAction]) -> [UInt8] {
        actions.reduce(into: []) { if case .write(let buffer) = $1 { $0 += buffer.bytes } }
    }

    static func closes(_ actions: [ConnectionAction]) -> [ConnectionEnd] {
        actions.compactMap { if case .close(let end) = $0 { end } else { nil } }
    }

    /// A handshake record: u16 length, then the message.
    static func record(_ message: [UInt8]) -> [UInt8] {
        [UInt8(message.count >> 8), UInt8(message.count & 0xff)] + message
    }

    /// Splits one handshake record off the front of `bytes`.
    static func takeRecord(_ bytes: inout [UInt8]) -> [UInt8] {
        let length = Int(bytes[0]) << 8 | Int(bytes[1])
        defer { bytes.removeFirst(2 + length) }
        return Array(bytes[2..<(2 + length)])
    }

    static func handshake(_ role: NoiseHandshake.Role, identity: NodeIdentity) throws -> NoiseHandshake {
        try NoiseHandshake(
            protocolName: "Noise_XXpsk3_25519_ChaChaPoly_BLAKE2b", role: role,
            prologue: Preamble().bytes + Preamble().bytes,
            localStatic: identity.agreementKeyPair(), preSharedKeys: [meshKey.secret])
    }

    // MARK: - The machine as initiator

    @Test("an honest hand-built responder completes the handshake and exchanges frames")
    func honestResponder() throws {
        let machineIdentity = NodeIdentity.generate()
        var machine = Self.machine(.initiator, identity: machineIdentity)
        let peerIdentity = NodeIdentity.generate()
        var peer = try Self.handshake(.responder, identity: peerIdentity)

        #expect(Self.written(machine.start(now: Self.now)) == Preamble().bytes)
        var out = Self.written(machine.receive(ByteBuffer(bytes: Preamble().bytes), now: Self.now))
        #expect(try peer.readMessage(Self.takeRecord(&out)) == [], "message 1 carries an empty payload")
        #expect(out.isEmpty)

        let peerInfo = NodeInfo(identity: peerIdentity.publicKey, displayName: "hand-built")
        let message2 = try peer.writeMessage(payload: peerInfo.bytes)
        out = Self.written(machine.receive(ByteBuffer(bytes: Self.record(message2)), now: Self.now))
        let machineInfo = try NodeInfo(bytes: peer.readMessage(Self.takeRecord(&out)))
        #expect(machineInfo == NodeInfo(identity: machineIdentity.publicKey, displayName: "machine"))
        #expect(peer.isComplete)
        #expect(out.isEmpty)
        #expect(machine.peer == nil, "not confirmed until a record from the responder opens")

        let (send, receive) = peer.split()
        var codec = TransportCodec(send: send, receive: receive)
        var wire = ByteBuffer()
        try codec.seal(.data(ByteBuffer(string: "hi")), into: &wire)
        let actions = machine.receive(wire, now: Self.now)
        let authenticated = actions.compactMap { if case .authenticated(let info) = $0 { info } else { nil } }
        #expect(authenticated == [peerInfo])
        let data = actions.compactMap { if case .data(let bytes) = $0 { String(buffer: bytes) } else { nil } }
        #expect(data == ["hi"])
        #expect(machine.peer == peerInfo)

        // A PING from the peer is answered with a PONG carrying the same value.
        wire.clear()
        try codec.seal(.ping(0xfeed), into: &wire)
        var reply = ByteBuffer(bytes: Self.written(machine.receive(wire, now: Self.now)))
        #expect(try codec.open(from: &reply) == .pong(0xfeed))
        #expect(reply.readableBytes == 0)
    }

    @Test("a message 1 with a payload is refused: the responder writes nothing more and closes")
    func message1WithPayload() throws {
        var machine = Self.machine(.responder)
        var peer = try Self.handshake(.initiator, identity: .generate())
        #expect(Self.written(machine.start(now: Self.now)) == Preamble().bytes)
        _ = machine.receive(ByteBuffer(bytes: Preamble().bytes), now: Self.now)
        let message1 = try peer.writeMessage(payload: Array("hello".utf8))
        let actions = machine.receive(ByteBuffer(bytes: Self.record(message1)), now: Self.now)
        #expect(Self.written(actions).isEmpty, "no message 2")
        #expect(Self.closes(actions).map(\.kind) == [.handshakeFailed])
        #expect(Self.closes(actions).first?.detail.contains("message 1") == true)
        #expect(Self.closes(actions).first?.detail.contains("must be empty") == true)
    }

    @Test("a responder whose node info names another identity than its Noise key is rejected")
    func forgedResponderIdentity() throws {
        var machine = Self.machine(.initiator)
        let mallory = NodeIdentity.generate()
        let victim = NodeIdentity.generate()
        var peer = try Self.handshake(.responder, identity: mallory)
        _ = machine.start(now: Self.now)
        var out = Self.written(machine.receive(ByteBuffer(bytes: Preamble().bytes), now: Self.now))
        _ = try peer.readMessage(Self.takeRecord(&out))
        let message2 = try peer.writeMessage(payload: NodeInfo(identity: victim.publicKey, displayName: "victim").bytes)
        let actions = machine.receive(ByteBuffer(bytes: Self.record(message2)), now: Self.now)
        #expect(Self.written(actions).isEmpty, "message 3 is not sent to an impostor")
        #expect(Self.closes(actions).map(\.kind) == [.handshakeFailed])
        #expect(Self.closes(actions).first?.detail.contains("does not match") == true)
        #expect(machine.peer == nil)
    }

    @Test("a responder sending unparsable node info is rejected", arguments: [[UInt8](), [0, 1, 2], [UInt8](repeating: 0, count: 43)])
    func badResponderNodeInfo(payload: [UInt8]) throws {
        var machine = Self.machine(.initiator)
        var peer = try Self.handshake(.responder, identity: .generate())
        _ = machine.start(now: Self.now)
        var out = Self.written(machine.receive(ByteBuffer(bytes: Preamble().bytes), now: Self.now))
        _ = try peer.readMessage(Self.takeRecord(&out))
        let actions = machine.receive(ByteBuffer(bytes: Self.record(try peer.writeMessage(payload: payload))), now: Self.now)
        #expect(Self.closes(actions).map(\.kind) == [.handshakeFailed])
        #expect(Self.closes(actions).first?.detail.contains("node info") == true)
    }

    @Test("a responder whose node info names a key that is not a usable point is rejected")
    func invalidPointResponder() throws {
        var machine = Self.machine(.initiator)
        var peer = try Self.handshake(.responder, identity: .generate())
        _ = machine.start(now: Self.now)
        var out = Self.written(machine.receive(ByteBuffer(bytes: Preamble().bytes), now: Self.now))
        _ = try peer.readMessage(Self.takeRecord(&out))
        var info = NodeInfo(identity: NodeIdentity.generate().publicKey, displayName: "zero").bytes
        info.replaceSubrange(10..<42, with: [UInt8](repeating: 0, count: 32))
        let actions = machine.receive(ByteBuffer(bytes: Self.record(try peer.writeMessage(payload: info))), now: Self.now)
        #expect(Self.written(actions).isEmpty)
        #expect(Self.closes(actions).map(\.kind) == [.handshakeFailed])
        #expect(Self.closes(actions).first?.detail.contains("invalid Ed25519 key") == true)
    }

    // MARK: - The machine as responder

    @Test("an honest hand-built initiator completes the handshake; the responder's first record is PING 0")
    func honestInitiator() throws {
        let machineIdentity = NodeIdentity.generate()
        var machine = Self.machine(.responder, identity: machineIdentity)
        let peerIdentity = NodeIdentity.generate()
        var peer = try Self.handshake(.initiator, identity: peerIdentity)

        _ = machine.start(now: Self.now)
        var out = Self.written(machine.receive(ByteBuffer(bytes: Preamble().bytes + Self.record(try peer.writeMessage(payload: []))), now: Self.now))
        let machineInfo = try NodeInfo(bytes: peer.readMessage(Self.takeRecord(&out)))
        #expect(machineInfo.identity == machineIdentity.publicKey)
        #expect(out.isEmpty)

        let peerInfo = NodeInfo(identity: peerIdentity.publicKey, displayName: "hand-built")
        let actions = machine.receive(ByteBuffer(bytes: Self.record(try peer.writeMessage(payload: peerInfo.bytes))), now: Self.now)
        let authenticated = actions.compactMap { if case .authenticated(let info) = $0 { info } else { nil } }
        #expect(authenticated == [peerInfo])
        #expect(machine.peer == peerInfo)

        let (send, receive) = peer.split()
        let codec = TransportCodec(send: send, receive: receive)
        var records = ByteBuffer(bytes: Self.written(actions))
        #expect(try codec.open(from: &records) == .ping(0))
        #expect(records.readableBytes == 0)
    }

    @Test("an initiator whose node info names another identity than its Noise key is rejected")
    func forgedInitiatorIdentity() throws {
        var machine = Self.machine(.responder)
        let mallory = NodeIdentity.generate()
        let victim = NodeIdentity.generate()
        var peer = try Self.handshake(.initiator, identity: mallory)
        _ = machine.start(now: Self.now)
        var out = Self.written(machine.receive(ByteBuffer(bytes: Preamble().bytes + Self.record(try peer.writeMessage(payload: []))), now: Self.now))
        _ = try peer.readMessage(Self.takeRecord(&out))
        let message3 = try peer.writeMessage(payload: NodeInfo(identity: victim.publicKey, displayName: "victim").bytes)
        let actions = machine.receive(ByteBuffer(bytes: Self.record(message3)), now: Self.now)
        #expect(Self.closes(actions).map(\.kind) == [.handshakeFailed])
        #expect(Self.closes(actions).first?.detail.contains("does not match") == true)
        #expect(Self.written(actions).isEmpty, "no record is sent to an impostor")
        #expect(machine.peer == nil)
    }

    @Test("a prologue that leaves out the preambles does not interoperate")
    func prologueIsBothPreambles() throws {
        var machine = Self.machine(.responder)
        var peer = try NoiseHandshake(
            protocolName: "Noise_XXpsk3_25519_ChaChaPoly_BLAKE2b", role: .initiator, prologue: [],
            localStatic: NodeIdentity.generate().agreementKeyPair(), preSharedKeys: [Self.meshKey.secret])
        _ = machine.start(now: Self.now)
        let actions = machine.receive(ByteBuffer(bytes: Preamble().bytes + Self.record(try peer.writeMessage(payload: []))), now: Self.now)
        #expect(Self.closes(actions).map(\.kind) == [.handshakeFailed])
    }
}
