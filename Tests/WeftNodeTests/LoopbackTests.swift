import Foundation
import NIOCore
import NIOPosix
import Testing
import WeftCrypto
import WeftNode
import WeftWire

@Suite("nodes over real loopback TCP", .timeLimit(.minutes(3)))
struct LoopbackTests {
    @Test("two nodes authenticate each other, exchange data and keep pinging")
    func twoNodes() async throws {
        let meshKey = MeshKey.generate()
        let policy = ChannelPolicy(pingInterval: .milliseconds(100), idleTimeout: .milliseconds(600))
        let alice = try startNode("alice", meshKey: meshKey, policy: policy)
        let aliceEvents = alice.events
        let address = try await alice.address()
        let bob = try startNode("bob", meshKey: meshKey, peers: [address.peerAddress], policy: policy)
        let bobEvents = bob.events

        let aliceSeenByBob = try await bobEvents.first(Match.authenticated)
        let bobSeenByAlice = try await aliceEvents.first(Match.authenticated)
        #expect(aliceSeenByBob.identity == alice.identity)
        #expect(aliceSeenByBob.displayName == "alice")
        #expect(bobSeenByAlice.identity == bob.identity)
        #expect(bobSeenByAlice.displayName == "bob")

        try await bob.send(ByteBuffer(string: "to alice"), to: alice.identity)
        try await alice.send(ByteBuffer(string: "to bob"), to: bob.identity)
        #expect(try await aliceEvents.first(Match.data) == "to alice")
        #expect(try await bobEvents.first(Match.data) == "to bob")

        // Keepalive: with nothing else sent, pings keep the link past the 600 ms idle timeout.
        // (A side pings only when it sent nothing for the interval, so one side may do all the pinging.)
        try await Task.sleep(for: .milliseconds(1500))
        #expect(aliceEvents.count(Match.pong) + bobEvents.count(Match.pong) > 0)
        #expect(aliceEvents.count(Match.ended) == 0)
        #expect(bobEvents.count(Match.ended) == 0)

        try await bob.stop()
        let end = try await aliceEvents.first(Match.ended)
        #expect(end.kind == .peerClosed)
        #expect(end.detail.contains("shutting down"))
        #expect(alice.connectedPeers.isEmpty)
        try await alice.stop()
    }

    @Test("a peer with another mesh key fails on both sides; the listener serves the next peer")
    func wrongMeshKey() async throws {
        let meshKey = MeshKey.generate()
        let alice = try startNode("alice", meshKey: meshKey)
        let aliceEvents = alice.events
        let address = try await alice.address()

        let mallory = try startNode("mallory", meshKey: .generate(), peers: [address.peerAddress])
        let malloryEvents = mallory.events
        let aliceSide = try await aliceEvents.first(Match.endedBeforeAuthentication)
        let mallorySide = try await malloryEvents.first(Match.ended)
        try await mallory.stop()
        #expect(aliceSide.kind == .handshakeFailed)
        #expect(aliceSide.detail.contains("mesh key"))
        #expect(mallorySide.kind == .handshakeFailed)
        #expect(mallorySide.detail.contains("mesh key"))
        #expect(aliceEvents.count(Match.authenticated) == 0)
        #expect(malloryEvents.count(Match.authenticated) == 0)

        let bob = try startNode("bob", meshKey: meshKey, peers: [address.peerAddress])
        #expect(try await bob.events.first(Match.authenticated).identity == alice.identity)
        try await bob.stop()
        try await alice.stop()
    }

    /// Alice and Bob stay connected while a third connection misbehaves.
    private func connectedPair() async throws -> (RunningNode, EventRecorder, RunningNode, EventRecorder, SocketAddress, MeshKey) {
        let meshKey = MeshKey.generate()
        let alice = try startNode("alice", meshKey: meshKey)
        let aliceEvents = alice.events
        let address = try await alice.address()
        let bob = try startNode("bob", meshKey: meshKey, peers: [address.peerAddress])
        let bobEvents = bob.events
        _ = try await bobEvents.first(Match.authenticated)
        _ = try await aliceEvents.first(Match.authenticated)
        return (alice, aliceEvents, bob, bobEvents, address, meshKey)
    }

    private func expectStillTalking(_ alice: RunningNode, _ bob: RunningNode, _ bobEvents: EventRecorder) async throws {
        try await alice.send(ByteBuffer(string: "still here"), to: bob.identity)
        #expect(try await bobEvents.first(Match.data) == "still here")
        #expect(alice.connectedPeers == [bob.identity])
    }

    @Test("garbage bytes close only that connection")
    func garbage() async throws {
        let (alice, aliceEvents, bob, bobEvents, address, _) = try await connectedPair()
        let raw = try await RawPeer.connect(to: address)
        let closedByAlice = try await raw.run { inbound, outbound in
            try await outbound.write(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: weft\r\n\r\n"))
            var received = 0
            for try await bytes in inbound { received += bytes.readableBytes }
            return received
        }
        #expect(closedByAlice == WireConstants.preambleByteCount)  // alice's preamble, then close
        let end = try await aliceEvents.first(Match.endedBeforeAuthentication)
        #expect(end.kind == .protocolViolation)
        #expect(end.detail.contains("not a Weft node"))
        try await expectStillTalking(alice, bob, bobEvents)
        try await bob.stop()
        try await alice.stop()
    }

    /// Completes a real handshake with alice from a raw socket, then sends `evil` and returns
    /// how the connection ended from the raw peer's point of view.
    private func authenticateThenSend(
        _ evil: @escaping @Sendable (inout ConnectionStateMachine) -> ByteBuffer,
        to address: SocketAddress, meshKey: MeshKey
    ) async throws -> ConnectionEnd? {
        try await withAuthenticatedRawPeer(at: address, meshKey: meshKey) { machine, inbound, outbound in
            try await outbound.write(evil(&machine))
            let rest = try await drive(&machine, [], inbound: &inbound, outbound: outbound) {
                if case .close = $0 { true } else { false }
            }
            for case .close(let end) in rest { return end }
            return machine.connectionClosed()
        }
    }

    @Test("a record longer than the maximum gets ERROR(frame too large) without being read")
    func oversizedRecord() async throws {
        let (alice, aliceEvents, bob, bobEvents, address, meshKey) = try await connectedPair()
        let end = try await authenticateThenSend({ _ in
            var bytes = ByteBuffer()
            bytes.writeInteger(UInt32.max)  // claims 4 GiB; nothing follows
            return bytes
        }, to: address, meshKey: meshKey)
        #expect(end?.kind == .peerReportedError)
        #expect(end?.detail.contains("frame too large") == true)
        let aliceSide = try await aliceEvents.first { event -> ConnectionEnd? in
            if case .connectionEnded(let peer?, _, let end, _) = event, peer.displayName == "raw" { end } else { nil }
        }
        #expect(aliceSide.kind == .protocolViolation)
        try await expectStillTalking(alice, bob, bobEvents)
        try await bob.stop()
        try await alice.stop()
    }

    @Test("a record that fails authentication gets ERROR(decryption failed)")
    func tamperedRecord() async throws {
        let (alice, _, bob, bobEvents, address, meshKey) = try await connectedPair()
        let end = try await authenticateThenSend({ machine in
            var record = ByteBuffer()
            for case .write(var bytes) in machine.send(data: ByteBuffer(string: "tampered"), now: .now()) {
                record.writeBuffer(&bytes)
            }
            let last = record.writerIndex - 1
            record.setInteger(record.getInteger(at: last, as: UInt8.self)! ^ 0x01, at: last)
            return record
        }, to: address, meshKey: meshKey)
        #expect(end?.kind == .peerReportedError)
        #expect(end?.detail.contains("decryption failed") == true)
        try await expectStillTalking(alice, bob, bobEvents)
        try await bob.stop()
        try await alice.stop()
    }

    @Test("a truncated record followed by a close ends only that connection")
    func truncatedRecord() async throws {
        let (alice, aliceEvents, bob, bobEvents, address, meshKey) = try await connectedPair()
        try await withAuthenticatedRawPeer(at: address, meshKey: meshKey) { machine, _, outbound in
            for case .write(let bytes) in machine.send(data: ByteBuffer(string: "cut short"), now: .now()) {
                try await outbound.write(bytes.getSlice(at: bytes.readerIndex, length: bytes.readableBytes - 3)!)
            }
        }
        let aliceSide = try await aliceEvents.first { event -> ConnectionEnd? in
            if case .connectionEnded(let peer?, _, let end, _) = event, peer.displayName == "raw" { end } else { nil }
        }
        #expect(aliceSide.kind == .connectionLost)
        #expect(aliceEvents.count(Match.data) == 0)
        try await expectStillTalking(alice, bob, bobEvents)
        try await bob.stop()
        try await alice.stop()
    }

    @Test("a silent peer is closed after the idle timeout with CLOSE(idle timeout)")
    func idleTimeout() async throws {
        let meshKey = MeshKey.generate()
        let policy = ChannelPolicy(pingInterval: .milliseconds(100), idleTimeout: .milliseconds(600))
        let alice = try startNode("alice", meshKey: meshKey, policy: policy)
        let address = try await alice.address()
        let end = try await withAuthenticatedRawPeer(at: address, meshKey: meshKey, policy: policy) { machine, inbound, _ in
            // Read alice's records but never answer: her pings go unanswered.
            var end: ConnectionEnd?
            while end == nil, let bytes = try await inbound.next() {
                for case .close(let reason) in machine.receive(bytes, now: .now()) { end = reason }
            }
            return end
        }
        #expect(end?.kind == .peerClosed)
        #expect(end?.detail.contains("idle timeout") == true)
        try await alice.stop()
    }

    @Test("a dialer retries until the listener appears")
    func redial() async throws {
        let meshKey = MeshKey.generate()
        // Reserve a port, free it, and point bob at it before alice listens there.
        let probe = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = probe.localAddress!.port!
        try await probe.close()
        let bob = try startNode("bob", meshKey: meshKey, peers: [PeerAddress(host: "127.0.0.1", port: port)])
        let bobEvents = bob.events
        try await Task.sleep(for: .milliseconds(300))
        #expect(bobEvents.count(Match.authenticated) == 0)

        let alice = try startNode("alice", meshKey: meshKey, listenAddress: PeerAddress(host: "127.0.0.1", port: port))
        #expect(try await bobEvents.first(Match.authenticated).identity == alice.identity)
        try await bob.stop()
        try await alice.stop()
    }
}
