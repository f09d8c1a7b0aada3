import Foundation
import NIOCore
import Testing
import WeftCrypto
import WeftNode
import WeftWire

/// Waits until `condition` holds, polling, or records a failure after `seconds`.
/// (60 s: see `EventRecorder.first`.)
func eventually(within seconds: Double = 60, _ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("not within \(seconds) s: \(what)")
    throw CancellationError()
}

@Suite("links between nodes: one connection per pair, cut and heal", .timeLimit(.minutes(3)))
struct LinkTests {
    @Test("two nodes that dial each other at once keep exactly one connection, the same on both sides")
    func bothDial() async throws {
        let meshKey = MeshKey.generate()
        let alice = try startNode("alice", meshKey: meshKey)
        let bob = try startNode("bob", meshKey: meshKey)
        let aliceAddress = try await alice.address().peerAddress
        let bobAddress = try await bob.address().peerAddress
        alice.node.connect(to: bobAddress)
        bob.node.connect(to: aliceAddress)

        try await eventually("both connected") {
            alice.connectedPeers == [bob.identity] && bob.connectedPeers == [alice.identity]
        }
        // Each side drops a duplicate with CLOSE 3 (or never made a second connection); both
        // end with the connection the lesser identity initiated (§5), the same one on both
        // sides: its two ends agree on who dialed.
        let aliceIsLesser = alice.identity.bytes.lexicographicallyPrecedes(bob.identity.bytes)
        let expected: ConnectionDirection = aliceIsLesser ? .outbound : .inbound
        try await eventually("both keep the connection the lesser identity dialed") {
            guard let a = alice.node.peers.first, let b = bob.node.peers.first else { return false }
            return alice.node.peers.count == 1 && bob.node.peers.count == 1 && a.direction == expected && b.direction != expected
        }
        // Data flows over it both ways.
        try await alice.send(ByteBuffer(string: "hi bob"), to: bob.identity)
        try await bob.send(ByteBuffer(string: "hi alice"), to: alice.identity)
        #expect(try await bob.events.first(Match.data) == "hi bob")
        #expect(try await alice.events.first(Match.data) == "hi alice")
        #expect(alice.node.peers.first?.direction == expected, "and it stays")
        try await alice.stop()
        try await bob.stop()
    }

    @Test("a connection replaced by the peer's preferred one ends naming the peer; the directory keeps only the new one")
    func replacedConnection() async throws {
        let meshKey = MeshKey.generate()
        let one = try startNode("one", meshKey: meshKey)
        let two = try startNode("two", meshKey: meshKey)
        let (lesser, greater) = one.identity.bytes.lexicographicallyPrecedes(two.identity.bytes) ? (one, two) : (two, one)
        // The greater dials first; the lesser's own dial then wins by §5 and replaces it.
        greater.node.connect(to: try await lesser.address().peerAddress)
        try await eventually("connected, dialed by the greater") { lesser.connectedPeers == [greater.identity] }
        lesser.node.connect(to: try await greater.address().peerAddress)
        try await eventually("the lesser's own connection replaced it") {
            lesser.node.peers.count == 1 && lesser.node.peers.first?.direction == .outbound
        }
        let end = try await lesser.events.first { event -> NodeInfo? in
            if case .connectionEnded(let peer?, _, _, _) = event { peer } else { nil }
        }
        #expect(end.identity == greater.identity)
        #expect(lesser.node.isConnected(greater.identity), "the peer is still connected")
        // What `weft peers` lists: one connection, the new one. (The events reach the recorder
        // on their own task: the new connection's may come a moment after `peers` shows it.)
        try await eventually("the directory lists the new connection alone") {
            let directory = PeerDirectory(clock: { 0 })
            for event in lesser.events.all { directory.record(event) }
            return directory.connections.map(\.direction) == [.outbound]
        }
        try await one.stop()
        try await two.stop()
    }

    @Test("a cut link closes with CLOSE 4 and stays down; healed, the dialer reconnects at once")
    func cutAndHeal() async throws {
        let meshKey = MeshKey.generate()
        let alice = try startNode("alice", meshKey: meshKey)
        let aliceAddress = try await alice.address().peerAddress
        let bob = try startNode("bob", meshKey: meshKey, peers: [aliceAddress])
        try await eventually("connected") { alice.connectedPeers == [bob.identity] }

        alice.node.cut(bob.identity)
        bob.node.cut(alice.identity)
        try await eventually("disconnected") { alice.connectedPeers.isEmpty && bob.connectedPeers.isEmpty }
        let end = try await bob.events.first(Match.ended)
        #expect(end.detail.contains("link cut") || end.detail.contains("cut"))
        #expect(bob.node.peers.isEmpty)

        // Healed: bob's dialer was waiting out its backoff; heal wakes it.
        let healedAt = ContinuousClock.now
        alice.node.heal(bob.identity)
        bob.node.heal(alice.identity)
        try await eventually(within: 5, "reconnected") {
            alice.connectedPeers == [bob.identity] && bob.connectedPeers == [alice.identity]
        }
        #expect(ContinuousClock.now - healedAt < .seconds(3))
        #expect(bob.node.peers.first?.origin == .configured)
        #expect(alice.node.peers.first?.origin == .inbound)
        try await alice.stop()
        try await bob.stop()
    }
}
