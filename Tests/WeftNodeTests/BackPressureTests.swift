import NIOCore
import Synchronization
import Testing
import WeftCrypto
import WeftNode
import WeftWire

/// A count shared between a test and its tasks.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }
}

/// Waits until `value` stops changing for `quiet` (a writer that is held back), within `seconds`.
func settledValue(of value: () -> Int, quiet: Duration = .seconds(1), within seconds: Int = 30) async throws -> Int {
    let deadline = ContinuousClock.now + .seconds(seconds)
    var last = value()
    var unchangedSince = ContinuousClock.now
    while ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(50))
        let now = value()
        if now != last {
            last = now
            unchangedSince = ContinuousClock.now
        } else if ContinuousClock.now - unchangedSince >= quiet {
            return now
        }
    }
    Issue.record("the value kept changing for \(seconds) s")
    throw CancellationError()
}

/// Waits until `condition` holds, within `seconds`.
func eventually(
    _ what: @autoclosure () -> String = "", within seconds: Int = 30, _ condition: () -> Bool
) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("condition not met within \(seconds) s: \(what())")
    throw CancellationError()
}

@Suite("back-pressure and limits over real loopback TCP", .timeLimit(.minutes(3)))
struct BackPressureTests {
    /// 128 frames of 1 MiB: twice what loopback socket buffers (here up to 32 MiB to receive
    /// and 4 MiB to send) and the nodes' own buffers hold together, so a sender that ignored
    /// back-pressure would finish.
    static let frameCount = 128
    static let payload = ByteBuffer(repeating: 0xab, count: WireConstants.maxDataPayloadByteCount)

    @Test("a payload over the frame limit makes send throw; the connection carries on")
    func oversizedSend() async throws {
        let meshKey = MeshKey.generate()
        let alice = try startNode("alice", meshKey: meshKey)
        let bob = try startNode("bob", meshKey: meshKey, peers: [try await alice.address().peerAddress])
        _ = try await bob.events.first(Match.authenticated)
        _ = try await alice.events.first(Match.authenticated)

        let tooLarge = ByteBuffer(repeating: 0, count: WireConstants.maxDataPayloadByteCount + 1)
        await #expect(throws: PeerChannelError.payloadTooLarge(WireConstants.maxDataPayloadByteCount + 1)) {
            try await bob.send(tooLarge, to: alice.identity)
        }
        try await bob.send(Self.payload, to: alice.identity)
        let received = try await alice.events.first(Match.dataBytes)
        #expect(received == Self.payload)
        #expect(bob.connectedPeers == [alice.identity])
        await #expect(throws: PeerChannelError.unknownPeer(bob.identity)) {
            try await bob.send(ByteBuffer(string: "to myself"), to: bob.identity)
        }
        try await bob.stop()
        try await alice.stop()
    }

    @Test("sending to a peer that does not read waits, and finishes once the peer reads")
    func outboundWaitsForTheSocket() async throws {
        let meshKey = MeshKey.generate()
        let alice = try startNode("alice", meshKey: meshKey, policy: ChannelPolicy(idleTimeout: .seconds(60)))
        let address = try await alice.address()
        try await withAuthenticatedRawPeer(at: address, meshKey: meshKey) { machine, inbound, _ in
            let raw = try await alice.events.first(Match.authenticated).identity
            let sent = Counter()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for _ in 0..<Self.frameCount {
                        try await alice.send(Self.payload, to: raw)
                        sent.increment()
                    }
                }
                // The raw peer reads nothing yet: alice's sends must stall.
                let held = try await settledValue(of: { sent.value })
                #expect(held < Self.frameCount / 2, "alice sent \(held) MiB to a peer that read nothing")

                // Now read everything: every frame arrives and every send returns.
                var received = 0
                while received < Self.frameCount, let bytes = try await inbound.next() {
                    for case .data(let data) in machine.receive(bytes, now: .now()) {
                        #expect(data == Self.payload)
                        received += 1
                    }
                }
                try await group.waitForAll()
                #expect(received == Self.frameCount)
                #expect(sent.value == Self.frameCount)
            }
        }
        try await alice.stop()
    }

    @Test("a node whose events are not taken stops reading; the peer's writes wait, then all arrive")
    func inboundWaitsForTheConsumer() async throws {
        let meshKey = MeshKey.generate()
        let alice = try startNode("alice", meshKey: meshKey, policy: ChannelPolicy(idleTimeout: .seconds(60)))
        let address = try await alice.address()
        try await withAuthenticatedRawPeer(at: address, meshKey: meshKey) { machine, _, outbound in
            _ = try await alice.events.first(Match.authenticated)
            alice.events.pause()
            let written = Counter()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { [machine] in
                    // The writer seals with its own copy of the machine; the test's copy is
                    // not used again.
                    var machine = machine
                    for _ in 0..<Self.frameCount {
                        for case .write(let record) in machine.send(data: Self.payload, now: .now()) {
                            try await outbound.write(record)
                        }
                        written.increment()
                    }
                }
                let held = try await settledValue(of: { written.value })
                #expect(held < Self.frameCount / 2, "the raw peer wrote \(held) MiB to a node that took no events")

                alice.events.resume()
                try await eventually("\(alice.events.count(Match.dataBytes)) of \(Self.frameCount) frames arrived; ended: \(alice.events.count(Match.ended))") {
                    alice.events.count(Match.dataBytes) == Self.frameCount
                }
                #expect(alice.events.count(Match.ended) == 0)
                try await group.waitForAll()
            }
        }
        try await alice.stop()
    }
}
