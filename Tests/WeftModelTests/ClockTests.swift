import Testing
@testable import WeftModel

@Suite("hybrid logical clock")
struct ClockTests {
    @Test("a tick follows the wall clock forward, and counts when the wall clock stands still or goes back")
    func ticks() {
        var clock = HybridLogicalClock()
        #expect(clock.tick(wallMilliseconds: 1_000) == HLCTimestamp(milliseconds: 1_000, counter: 0))
        #expect(clock.tick(wallMilliseconds: 1_000) == HLCTimestamp(milliseconds: 1_000, counter: 1))
        #expect(clock.tick(wallMilliseconds: 900) == HLCTimestamp(milliseconds: 1_000, counter: 2))
        #expect(clock.tick(wallMilliseconds: 1_001) == HLCTimestamp(milliseconds: 1_001, counter: 0))
    }

    @Test("a full counter moves on to the next millisecond")
    func counterOverflow() {
        var clock = HybridLogicalClock(last: HLCTimestamp(milliseconds: 5, counter: .max))
        let next = clock.tick(wallMilliseconds: 5)
        #expect(next == HLCTimestamp(milliseconds: 6, counter: 0))
        #expect(next > HLCTimestamp(milliseconds: 5, counter: .max))
    }

    @Test("after observing a timestamp, every tick is later than it")
    func observe() {
        var clock = HybridLogicalClock()
        clock.observe(HLCTimestamp(milliseconds: 9_000, counter: 4))
        #expect(clock.tick(wallMilliseconds: 10) == HLCTimestamp(milliseconds: 9_000, counter: 5))
        clock.observe(HLCTimestamp(milliseconds: 1, counter: 0))
        #expect(clock.tick(wallMilliseconds: 10) == HLCTimestamp(milliseconds: 9_000, counter: 6))
    }

    @Test("an author writes after its causes even when its wall clock is behind theirs")
    func authorAfterCauses() {
        var a = Peer(0), b = Peer(1)
        a.wall = 50_000
        let create = a.create(with: [b.user])
        let hello = a.post("from the future", in: create.conversation)
        b.receive([create, hello])
        b.wall = 10
        let reply = b.post("from the past", in: create.conversation)
        #expect(b.accepted)
        #expect(reply.operation.timestamp > hello.operation.timestamp)
    }
}
