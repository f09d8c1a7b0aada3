import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

/// The connection state machine from TCP connect to an authenticated channel (and every way
/// that can fail), two machines pumped against each other in memory.
@Suite("ConnectionStateMachine: handshake")
struct ConnectionHandshakeTests {
    typealias Side = InMemoryLink.Side

    static let policy = ChannelPolicy(
        pingInterval: .seconds(15), idleTimeout: .seconds(60), handshakeTimeout: .seconds(10))

    static func machine(_ role: ConnectionStateMachine.Role) -> ConnectionStateMachine {
        ConnectionStateMachine(
            role: role,
            configuration: .init(identity: .generate(), meshKey: .generate(), displayName: "solo", policy: policy))
    }

    static let start = NIODeadline.uptimeNanoseconds(5_000_000_000)

    static func writes(_ actions: [ConnectionAction]) -> [[UInt8]] {
        actions.compactMap { if case .write(let buffer) = $0 { buffer.bytes } else { nil } }
    }

    static func closes(_ actions: [ConnectionAction]) -> [ConnectionEnd] {
        actions.compactMap { if case .close(let end) = $0 { end } else { nil } }
    }

    // MARK: - (a) success

    @Test("the handshake completes; each side learns the other's identity and name; data flows both ways")
    func handshakeCompletes() {
        var link = InMemoryLink(policy: Self.policy)
        link.establish()
        for side in Side.allCases {
            #expect(link.authenticated(side) == [link.expectedInfo(of: side.other)], "\(side)")
            #expect(link[side].peer == link.expectedInfo(of: side.other))
            #expect(link[side].peer?.displayName == InMemoryLink.displayNames[side.other])
            #expect(link[side].peer?.identity == link.configurations[side.other]!.identity.publicKey)
            #expect(link.ends[side] == nil)
            #expect(!link[side].isClosed)
            // Each side's first write is its preamble.
            #expect(link.writes[side]!.first?.bytes == Preamble().bytes)
        }

        link.send("hello bob", from: .initiator)
        link.send("hello alice", from: .responder)
        link.send("second", from: .initiator)
        link.run()
        #expect(link.received(.responder) == ["hello bob", "second"])
        #expect(link.received(.initiator) == ["hello alice"])
        #expect(link.ends.isEmpty)
    }

    @Test("feature bits travel in node info: a side that sets names is seen with bit 0, one that sets none with 0")
    func featureBits() {
        var initiator = ConnectionStateMachine.Configuration(identity: .generate(), meshKey: .generate(), displayName: "alice")
        initiator.features = .names
        let responder = ConnectionStateMachine.Configuration(identity: .generate(), meshKey: initiator.meshKey, displayName: "bob")
        var link = InMemoryLink(initiator: initiator, responder: responder)
        link.establish()
        #expect(link[.responder].peer?.features == 1)
        #expect(link[.responder].peer?.supportedFeatures.contains(.names) == true)
        #expect(link[.initiator].peer?.features == 0)
        #expect(link[.initiator].peer?.supportedFeatures.contains(.names) == false)
        // Bits this version does not define are read and kept, and mean nothing.
        let info = NodeInfo(identity: initiator.identity.publicKey, displayName: "alice", features: 0x8000_0000_0000_0003)
        let read = try? NodeInfo(bytes: info.bytes)
        #expect(read?.supportedFeatures.contains(.names) == true)
        #expect(read?.features == 0x8000_0000_0000_0003)
    }

    @Test("step by step: the initiator is authenticated only when the responder's first record arrives")
    func stepByStep() {
        var link = InMemoryLink(policy: Self.policy)
        link.start()
        link.deliver(to: .responder)  // initiator's preamble: the responder waits for message 1
        #expect(link.writes[.responder]!.count == 1)
        link.deliver(to: .initiator)  // responder's preamble: the initiator sends message 1
        #expect(link.writes[.initiator]!.count == 2)
        #expect(link.writes[.initiator]![1].readableBytes == 2 + 32 + 16, "message 1: e and an empty sealed payload")
        link.deliver(to: .responder)  // message 1: the responder sends message 2
        #expect(link.writes[.responder]!.count == 2)
        link.deliver(to: .initiator)  // message 2: the initiator sends message 3 and has keys...
        #expect(link.writes[.initiator]!.count == 3)
        #expect(link.authenticated(.initiator).isEmpty, "...but does not yet know the mesh key was accepted")
        #expect(!link.initiator.isEstablished)
        #expect(link.initiator.peer == nil)
        link.deliver(to: .responder)  // message 3: the responder is authenticated and sends its first record
        #expect(link.authenticated(.responder) == [link.expectedInfo(of: .initiator)])
        #expect(link.responder.isEstablished)
        link.deliver(to: .initiator)  // that record confirms the initiator
        #expect(link.authenticated(.initiator) == [link.expectedInfo(of: .responder)])
        #expect(link.initiator.isEstablished)
        link.run()
        #expect(link.ends.isEmpty)
    }

    // MARK: - (b) mesh keys

    @Test("different mesh keys: the responder rejects message 3, then the initiator reports it too")
    func differentMeshKeys() {
        var link = InMemoryLink(policy: Self.policy, meshKey: .generate(), responderMeshKey: .generate())
        link.start()
        link.run()
        let responderEnd = link.closes(.responder)
        #expect(responderEnd.map(\.kind) == [.handshakeFailed])
        #expect(responderEnd.first?.detail.contains("mesh key") == true, "\(responderEnd)")
        // The initiator's machine did not end itself: it heard the connection close.
        #expect(link.closes(.initiator).isEmpty)
        #expect(link.ends[.initiator]?.kind == .handshakeFailed)
        #expect(link.ends[.initiator]?.detail.contains("mesh key") == true)
        #expect(link.authenticated(.initiator).isEmpty && link.authenticated(.responder).isEmpty)
        #expect(link.initiator.isClosed && link.responder.isClosed)
    }

    // MARK: - (c) versions

    @Test("a peer speaking another version: versionMismatch naming both versions",
          arguments: [ConnectionStateMachine.Role.initiator, .responder], [UInt16(0), 2, 0xffff])
    func versionMismatch(role: ConnectionStateMachine.Role, version: UInt16) {
        var machine = Self.machine(role)
        #expect(Self.writes(machine.start(now: Self.start)) == [Preamble().bytes])
        let actions = machine.receive(ByteBuffer(bytes: Preamble(version: version).bytes), now: Self.start)
        #expect(Self.writes(actions).isEmpty, "nothing is sent to a peer we cannot talk to")
        let ends = Self.closes(actions)
        #expect(ends.map(\.kind) == [.versionMismatch])
        let detail = ends.first?.detail ?? ""
        #expect(detail.contains("version \(version)"), "\(detail)")
        #expect(detail.contains("speaks \(WireConstants.protocolVersion)"), "\(detail)")
        #expect(machine.isClosed)
        #expect(machine.connectionClosed() == nil, "already ended")
    }

    @Test("a version mismatch over the link: the other side hears the connection close")
    func versionMismatchOverLink() {
        var link = InMemoryLink(policy: Self.policy)
        link.start()
        // Swap the initiator's preamble for a version 2 one on its way to the responder.
        link.corruptions[.responder] = [5: 0x01 ^ 0x02]
        link.run()
        #expect(link.closes(.responder).map(\.kind) == [.versionMismatch])
        #expect(link.closes(.responder).first?.detail.contains("version 2") == true)
        #expect(link.ends[.initiator]?.kind == .handshakeFailed || link.ends[.initiator]?.kind == .connectionLost)
    }

    // MARK: - (d) garbage

    @Test("garbage instead of a preamble: closed as a protocol violation",
          arguments: [ConnectionStateMachine.Role.initiator, .responder],
          ["GET / HTTP/1.1\r\nHost: x\r\n\r\n", "SSH-2.0-OpenSSH_9.6\r\n", "\0\0\0\0\0\0\0\0"])
    func garbagePreamble(role: ConnectionStateMachine.Role, garbage: String) {
        var machine = Self.machine(role)
        _ = machine.start(now: Self.start)
        let actions = machine.receive(ByteBuffer(string: garbage), now: Self.start)
        #expect(Self.writes(actions).isEmpty)
        #expect(Self.closes(actions).map(\.kind) == [.protocolViolation])
        #expect(Self.closes(actions).first?.detail.contains("not a Weft node") == true)
        #expect(machine.isClosed)
        // Anything after that is ignored.
        #expect(machine.receive(ByteBuffer(string: "more"), now: Self.start).isEmpty)
    }

    @Test("fewer than eight bytes of anything: the machine waits")
    func shortPreambleWaits() {
        var machine = Self.machine(.responder)
        _ = machine.start(now: Self.start)
        #expect(machine.receive(ByteBuffer(string: "GET"), now: Self.start).isEmpty)
        #expect(!machine.isClosed)
        #expect(machine.connectionClosed()?.kind == .connectionLost)
    }

    // MARK: - (e) byte at a time

    @Test("the whole exchange, delivered one byte at a time in both directions, completes")
    func byteAtATime() {
        var link = InMemoryLink(policy: Self.policy)
        link.chunkSize = 1
        link.establish()
        #expect(link.authenticated(.initiator) == [link.expectedInfo(of: .responder)])
        #expect(link.authenticated(.responder) == [link.expectedInfo(of: .initiator)])
        link.send("one byte at a time", from: .initiator)
        link.send(String(repeating: "z", count: 300), from: .responder)
        link.run()
        #expect(link.received(.responder) == ["one byte at a time"])
        #expect(link.received(.initiator) == [String(repeating: "z", count: 300)])
        link.close(.responder, .normal, reason: "done")
        link.run()
        #expect(link.ends[.initiator]?.kind == .peerClosed)
        #expect(link.delivered[.initiator]! > 300 && link.delivered[.responder]! > 100)
    }

    @Test("uneven chunk sizes also complete", arguments: [2, 3, 7, 50])
    func unevenChunks(size: Int) {
        var link = InMemoryLink(policy: Self.policy)
        link.chunkSize = size
        link.establish()
        link.send("ok", from: .responder)
        link.run()
        #expect(link.received(.initiator) == ["ok"])
    }

    // MARK: - (f) corrupted handshake bytes

    /// Stream offsets toward each side. Toward the responder: preamble 0..<8, message 1 length
    /// 8..<10, message 1 (e, tag) 10..<58, message 3 length 58..<60, message 3 from 60.
    /// Toward the initiator: preamble 0..<8, message 2 length 8..<10, message 2 (e, sealed s,
    /// sealed node info) from 10.
    static let handshakeCorruptions: [(toward: Side, offset: Int, detector: Side, what: String)] = [
        (.responder, 7, .responder, "the initiator's preamble reserved field (part of the prologue)"),
        // The initiator mixes the altered preamble into its prologue; the responder notices.
        (.initiator, 6, .responder, "the responder's preamble reserved field (part of the prologue)"),
        (.responder, 10, .responder, "message 1: the initiator's ephemeral key"),
        (.responder, 57, .responder, "message 1: the tag"),
        (.initiator, 10, .initiator, "message 2: the responder's ephemeral key"),
        (.initiator, 10 + 32 + 3, .initiator, "message 2: the responder's sealed static key"),
        (.initiator, 10 + 32 + 48 + 5, .initiator, "message 2: the responder's sealed node info"),
        (.responder, 60, .responder, "message 3: the initiator's sealed static key"),
        (.responder, 60 + 48 + 2, .responder, "message 3: the initiator's sealed node info"),
    ]

    @Test("a corrupted byte in the preamble or a handshake message fails the handshake on both sides",
          arguments: handshakeCorruptions)
    func corruptedHandshake(toward: Side, offset: Int, detector: Side, what: String) {
        var link = InMemoryLink(policy: Self.policy)
        link.corruptions[toward] = [offset: 0x20]
        link.start()
        link.run()
        #expect(link.closes(detector).map(\.kind) == [.handshakeFailed], "\(what): \(link.ends)")
        #expect(link.closes(detector.other).isEmpty, "\(what): the other side learns it from the hang-up")
        #expect(link.ends[detector.other]?.kind == .handshakeFailed, "\(what): \(link.ends)")
        #expect(link.authenticated(detector).isEmpty, "\(what)")
        #expect(link.initiator.isClosed && link.responder.isClosed)
    }

    @Test("a tampered version byte is a version mismatch, not a silent downgrade")
    func tamperedVersion() {
        var link = InMemoryLink(policy: Self.policy)
        link.corruptions[.initiator] = [4: 0x80]
        link.start()
        link.run()
        #expect(link.closes(.initiator).map(\.kind) == [.versionMismatch])
        #expect(link.authenticated(.responder).isEmpty)
    }

    // MARK: - Timeouts and hang-ups during the handshake

    @Test("no preamble within the handshake timeout: closed with .timeout")
    func handshakeTimeoutBeforePreamble() {
        var link = InMemoryLink(policy: Self.policy)
        link.start()  // preambles are queued but never delivered
        link.advance(by: .seconds(10) - .nanoseconds(1))
        #expect(link.tick(.initiator) == 0)
        #expect(link.tick(.responder) == 0)
        #expect(link.ends.isEmpty)
        link.advance(by: .nanoseconds(1))
        link.tick(.initiator)
        link.tick(.responder)
        for side in Side.allCases {
            #expect(link.closes(side).map(\.kind) == [.timeout])
            #expect(link.closes(side).first?.detail.contains("handshake") == true)
        }
    }

    @Test("a handshake stuck after the preambles times out")
    func handshakeTimeoutMidway() {
        var link = InMemoryLink(policy: Self.policy)
        link.start()
        link.deliver(to: .responder)
        link.deliver(to: .initiator)  // the initiator sent message 1, which is never delivered
        link.advance(by: .seconds(11))
        link.tick(.responder)
        #expect(link.closes(.responder).map(\.kind) == [.timeout])
        link.tick(.initiator)
        #expect(link.closes(.initiator).map(\.kind) == [.timeout])
    }

    @Test("an initiator whose message 3 is never confirmed gives up at the handshake deadline, having sent nothing")
    func unconfirmedInitiatorTimesOut() {
        var link = InMemoryLink(policy: Self.policy)
        link.start()
        link.deliver(to: .responder)
        link.deliver(to: .initiator)
        link.deliver(to: .responder)
        link.deliver(to: .initiator)  // message 2 in, message 3 out; the responder never answers
        let writesAfterMessage3 = link.writes[.initiator]!.count
        link.advance(by: .seconds(9))
        link.tick(.initiator)
        #expect(link.closes(.initiator).isEmpty, "still within the 10 s handshake timeout")
        #expect(link.writes[.initiator]!.count == writesAfterMessage3, "no keepalive PING before confirmation")
        link.advance(by: .seconds(2))
        link.tick(.initiator)
        let end = link.closes(.initiator)
        #expect(end.map(\.kind) == [.handshakeFailed])
        #expect(end.first?.detail.contains("did not confirm the handshake within 10 s") == true)
        #expect(link.writes[.initiator]!.count == writesAfterMessage3)
    }

    @Test("closing twice, or after the machine ended the connection, does nothing")
    func closeIsIdempotent() {
        var machine = Self.machine(.initiator)
        _ = machine.start(now: Self.start)
        #expect(Self.closes(machine.close(.normal, reason: "first", now: Self.start)).count == 1)
        #expect(machine.close(.normal, reason: "second", now: Self.start).isEmpty)
        #expect(machine.isClosed)
    }

    @Test("the handshake deadline runs from start(), not from the last byte")
    func handshakeDeadlineFixed() {
        var link = InMemoryLink(policy: Self.policy)
        link.start()
        link.advance(by: .seconds(6))
        link.deliver(to: .responder)
        link.advance(by: .seconds(6))
        link.tick(.responder)
        #expect(link.closes(.responder).map(\.kind) == [.timeout])
    }

    @Test("the peer hanging up mid-handshake is reported by connectionClosed()")
    func hangUpDuringHandshake() {
        var before = Self.machine(.initiator)
        _ = before.start(now: Self.start)
        #expect(before.connectionClosed()?.kind == .connectionLost)
        #expect(before.connectionClosed() == nil)

        var link = InMemoryLink(policy: Self.policy)
        link.start()
        link.deliver(to: .responder)
        link.deliver(to: .initiator)
        link.deliver(to: .responder)
        var responder = link.responder  // has sent message 2
        #expect(responder.connectionClosed()?.kind == .handshakeFailed)
    }

    @Test("a local close during the handshake sends no frame")
    func localCloseDuringHandshake() {
        var link = InMemoryLink(policy: Self.policy)
        link.start()
        link.deliver(to: .responder)
        #expect(link.close(.responder, .shuttingDown, reason: "stopping") == 0)
        #expect(link.closes(.responder).map(\.kind) == [.localClose])
        link.run()
        #expect(link.ends[.initiator] != nil)
        #expect(link.authenticated(.initiator).isEmpty)
    }

    @Test("garbage in place of message 1 fails the handshake")
    func garbageHandshakeMessage() {
        var machine = Self.machine(.responder)
        _ = machine.start(now: Self.start)
        var bytes = Preamble().bytes
        bytes += [0, 48] + [UInt8](repeating: 0xab, count: 48)
        let actions = machine.receive(ByteBuffer(bytes: bytes), now: Self.start)
        #expect(Self.closes(actions).map(\.kind) == [.handshakeFailed])
        #expect(Self.closes(actions).first?.detail.contains("message 1") == true)

        var short = Self.machine(.responder)
        _ = short.start(now: Self.start)
        let shortActions = short.receive(ByteBuffer(bytes: Preamble().bytes + [0, 3, 1, 2, 3]), now: Self.start)
        #expect(Self.closes(shortActions).map(\.kind) == [.handshakeFailed])
    }
}
