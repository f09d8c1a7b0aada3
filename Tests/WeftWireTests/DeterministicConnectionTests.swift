import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

/// With identities, mesh key and random sources fixed, a connection is a pure function of its
/// inputs: what a simulator needs to replay a run.
@Suite("ConnectionStateMachine: seeded randomness")
struct DeterministicConnectionTests {
    static let policy = ChannelPolicy(
        pingInterval: .seconds(5), idleTimeout: .seconds(30), handshakeTimeout: .seconds(10),
        rekeyAfterBytes: 200, rekeyAfterTime: .minutes(1))

    /// A link whose every input is fixed, the two random sources seeded with `seeds`.
    static func link(seeds: (initiator: UInt64, responder: UInt64)) -> InMemoryLink {
        let meshKey = MeshKey(secret: SecureBytes(copying: [UInt8](repeating: 0x4d, count: MeshKey.byteCount)))
        func configuration(_ side: InMemoryLink.Side, seed: UInt64) -> ConnectionStateMachine.Configuration {
            let identitySeed = [UInt8](repeating: side == .initiator ? 1 : 2, count: NodeIdentity.seedByteCount)
            return .init(
                identity: NodeIdentity(seed: SecureBytes(copying: identitySeed)), meshKey: meshKey,
                displayName: InMemoryLink.displayNames[side]!, policy: policy, random: SeededRandomSource(seed: seed))
        }
        return InMemoryLink(
            initiator: configuration(.initiator, seed: seeds.initiator),
            responder: configuration(.responder, seed: seeds.responder))
    }

    /// A whole session: handshake, data both ways, a ping, rekeys by bytes and by time, a close.
    static func session(seeds: (initiator: UInt64, responder: UInt64)) -> InMemoryLink {
        var link = link(seeds: seeds)
        link.establish()
        for round in 0..<6 {
            link.send(String(repeating: "a", count: 40 * round), from: .initiator)
            link.send("reply \(round)", from: .responder)
            link.run()
        }
        // Pings keep the link alive past the one-minute rekey time.
        for _ in 0..<14 {
            link.advance(by: .seconds(5))
            link.tick(.initiator)
            link.tick(.responder)
            link.run()
        }
        link.send("after the rekey", from: .responder)
        link.run()
        link.close(.initiator, .normal, reason: "done")
        link.run()
        return link
    }

    static func wire(_ link: InMemoryLink) -> [InMemoryLink.Side: [[UInt8]]] {
        link.writes.mapValues { $0.map { Array($0.readableBytesView) } }
    }

    @Test("two pairs with the same seeds write byte-identical streams")
    func sameSeedsSameBytes() {
        let first = Self.session(seeds: (1, 2))
        let second = Self.session(seeds: (1, 2))
        // The session did what it claims, so the comparison covers every kind of record.
        #expect(first.received(.responder).count == 6)
        #expect(first.received(.initiator).last == "after the rekey")
        #expect(!first.pongs(.initiator).isEmpty)
        #expect(first.closes(.initiator).map(\.kind) == [.localClose])
        #expect(first.writes[.initiator]!.count > 10)

        #expect(Self.wire(first) == Self.wire(second))
    }

    @Test("a different seed changes that side's ephemeral key, and with it every record after message 1")
    func otherSeedOtherBytes() {
        let first = Self.wire(Self.session(seeds: (1, 2)))
        for (reseeded, seeds) in [(InMemoryLink.Side.initiator, (UInt64(3), UInt64(2))), (.responder, (1, 3))] {
            let link = Self.session(seeds: seeds)
            #expect(link.received(.responder).count == 6)
            let other = Self.wire(link)
            // Write 0 is the preamble, write 1 the side's first handshake message (1 or 2).
            #expect(first[reseeded]![1] != other[reseeded]![1], "\(reseeded)'s ephemeral key")
            #expect(first[reseeded.other]![0] == other[reseeded.other]![0], "the preamble is fixed")
            for side in InMemoryLink.Side.allCases {
                let (ours, theirs) = (first[side]!, other[side]!)
                #expect(ours.count == theirs.count, "the same session")
                // From message 2 or 3 on, every record depends on both ephemeral keys.
                for (index, (mine, its)) in zip(ours, theirs).enumerated().dropFirst(2) {
                    #expect(mine != its, "\(side)'s write \(index), \(reseeded) reseeded")
                }
            }
        }
    }

    @Test("a seeded source repeats its draws, which depend on position and not on earlier sizes")
    func seededSource() {
        func draws(_ source: SeededRandomSource, _ sizes: [Int]) -> [[UInt8]] {
            sizes.map { size in
                var bytes = [UInt8](repeating: 0, count: size)
                bytes.withUnsafeMutableBytes { source.fill($0) }
                return bytes
            }
        }
        let first = draws(SeededRandomSource(seed: 7), [32, 32, 5])
        #expect(first == draws(SeededRandomSource(seed: 7), [32, 32, 5]))
        #expect(first[0] != first[1])
        #expect(first != draws(SeededRandomSource(seed: 8), [32, 32, 5]))
        let resized = draws(SeededRandomSource(seed: 7), [3, 32, 64])
        #expect(resized[1] == first[1], "draw 1 does not depend on draw 0's size")
        #expect(Array(resized[2].prefix(5)) == first[2])
        // The system source gives fresh bytes each time.
        let system = SystemRandomSource()
        #expect(system.secret(count: 32) != system.secret(count: 32))
    }
}
