import NIOCore
import Testing
import WeftCrypto
@testable import WeftNode

@Suite("dialers waiting to redial: heal, forget and stop end the wait at once", .timeLimit(.minutes(3)))
struct RedialTests {
    /// A redial delay no test waits out: anything that happens well before it was woken.
    static let longDelays: [TimeAmount] = [.seconds(30)]
    /// ±25 % jitter: the shortest wait a long delay can draw.
    static let shortestLongWait: Duration = .seconds(22)

    @Test("a healed link reconnects well within the redial delay its dialer was waiting out")
    func healWakesTheDialer() async throws {
        let meshKey = MeshKey.generate()
        let alice = try startNode("alice", meshKey: meshKey, redialDelays: Self.longDelays)
        let aliceAddress = try await alice.address().peerAddress
        let bob = try startNode("bob", meshKey: meshKey, peers: [aliceAddress], redialDelays: Self.longDelays)
        try await eventually("connected") { alice.connectedPeers == [bob.identity] && bob.connectedPeers == [alice.identity] }

        alice.node.cut(bob.identity)
        bob.node.cut(alice.identity)
        try await eventually("disconnected") { alice.connectedPeers.isEmpty && bob.connectedPeers.isEmpty }
        // Bob's dialer, its connection ended, waits out 30 s (±25 %) before it looks again.
        try await eventually("bob's dialer waits to redial") { bob.node.waitingDialerCount == 1 }

        let healedAt = ContinuousClock.now
        alice.node.heal(bob.identity)
        bob.node.heal(alice.identity)
        try await eventually(within: 20, "reconnected") {
            alice.connectedPeers == [bob.identity] && bob.connectedPeers == [alice.identity]
        }
        let took = ContinuousClock.now - healedAt
        print("redial: reconnected \(took) after heal, with a redial delay of 30 s")
        #expect(took < .seconds(10), "woken by heal, not by the delay (at least \(Self.shortestLongWait))")
        #expect(bob.node.dialerCount == 1)
        try await alice.stop()
        try await bob.stop()
    }

    @Test("forgetting an address ends its waiting dialer at once; added again, it gets one dialer")
    func forgetEndsTheDialer() async throws {
        let meshKey = MeshKey.generate()
        // An address where nothing listens any more: every dial is refused.
        let gone = try startNode("gone", meshKey: meshKey)
        let goneAddress = try await gone.address().peerAddress
        try await gone.stop()

        let alice = try startNode("alice", meshKey: meshKey, redialDelays: Self.longDelays)
        _ = try await alice.address()
        alice.node.connect(to: goneAddress)
        try await eventually("its dialer waits to redial") { alice.node.waitingDialerCount == 1 && alice.node.dialerCount == 1 }

        let forgottenAt = ContinuousClock.now
        alice.node.forget(goneAddress)
        try await eventually(within: 20, "the dialer ended") { alice.node.dialerCount == 0 }
        #expect(ContinuousClock.now - forgottenAt < .seconds(10), "ended by forget, not by the delay")
        #expect(alice.node.waitingDialerCount == 0)

        // Added again and forgotten again at once: whatever the dialer task saw, at most one
        // runs for the address, and it ends with its target.
        alice.node.connect(to: goneAddress)
        alice.node.forget(goneAddress)
        alice.node.connect(to: goneAddress)
        try await eventually("one dialer waits again") { alice.node.waitingDialerCount == 1 }
        #expect(alice.node.dialerCount == 1)

        // And stopping the node ends it too, without waiting out the delay.
        let stoppedAt = ContinuousClock.now
        try await alice.stop()
        #expect(ContinuousClock.now - stoppedAt < .seconds(10))
        #expect(alice.node.dialerCount == 0)
    }
}
