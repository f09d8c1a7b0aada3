import Testing
@testable import WeftTransfer

typealias TestCore = TransferCore<String, Int>
typealias TestAction = TransferAction<String, Int>

/// Helpers that read a core's actions.
extension Array where Element == TransferAction<String, Int> {
    /// Chunks asked of `peer` for `content`, in the order asked.
    func requested(of peer: Int, _ content: String = "c") -> [Int] {
        flatMap { action -> [Int] in if case .request(peer, content, let chunks) = action { chunks } else { [] } }
    }

    /// Chunks asked of any peer for `content`.
    func requested(_ content: String = "c") -> [Int] {
        flatMap { action -> [Int] in if case .request(_, content, let chunks) = action { chunks } else { [] } }
    }

    func cancelled(at peer: Int, _ content: String = "c") -> [Int] {
        flatMap { action -> [Int] in if case .cancel(peer, content, let chunks) = action { chunks } else { [] } }
    }

    /// Verified byte counts reported for `content`, in order.
    func progress(_ content: String = "c") -> [UInt64] {
        compactMap { action in if case .progress(content, let verified, _) = action { verified } else { nil } }
    }

    func pauses(_ content: String = "c") -> [TransferPauseReason] {
        compactMap { action in if case .paused(content, let reason) = action { reason } else { nil } }
    }

    func resumptions(_ content: String = "c") -> Int {
        count { $0 == .resumed(content) }
    }
}

/// A driver for the tests: plays the peers' side, remembering what is asked of each peer and
/// not answered (in the order asked), and keeps every action.
struct TransferCoreHarness {
    var core: TestCore
    var actions: [TestAction] = []
    /// Per peer, (content, chunk) asked and not answered nor cancelled.
    var outstanding: [Int: [(content: String, chunk: Int)]] = [:]

    init(configuration: TransferConfiguration = TransferConfiguration()) {
        core = TestCore(configuration: configuration)
    }

    @discardableResult
    mutating func handle(_ event: TransferEvent<String, Int>) -> [TestAction] {
        switch event {
        case .verified(let peer, let content, let chunk), .corrupt(let peer, let content, let chunk), .notHeld(let peer, let content, let chunk):
            if let index = outstanding[peer]?.firstIndex(where: { $0 == (content, chunk) }) { outstanding[peer]!.remove(at: index) }
        case .disconnected(let peer):
            outstanding[peer] = nil
        default:
            break
        }
        let new = core.handle(event)
        for action in new {
            switch action {
            case .request(let peer, let content, let chunks):
                for chunk in chunks {
                    #expect(!outstanding[peer, default: []].contains { $0 == (content, chunk) }, "asked twice of one peer")
                    outstanding[peer, default: []].append((content, chunk))
                }
            case .cancel(let peer, let content, let chunks):
                outstanding[peer]?.removeAll { $0.content == content && chunks.contains($0.chunk) }
            default:
                break
            }
        }
        #expect(core.requestsInFlight == outstanding.values.reduce(0) { $0 + $1.count })
        actions += new
        return new
    }

    /// Connects `peer`, and says it holds `holdings` of `content`.
    @discardableResult
    mutating func connect(_ peer: Int, holding holdings: TransferHoldings = .all, of content: String = "c") -> [TestAction] {
        handle(.connected(peer)) + handle(.holdings(peer, content, holdings))
    }

    mutating func disconnect(_ peer: Int) {
        handle(.disconnected(peer))
    }

    /// The oldest request outstanding at `peer`, answered: verified, or as `answer` says.
    @discardableResult
    mutating func answer(_ peer: Int, _ answer: Answer = .verified) -> [TestAction] {
        guard let (content, chunk) = outstanding[peer]?.first else { return [] }
        switch answer {
        case .verified: return handle(.verified(peer, content, chunk: chunk))
        case .corrupt: return handle(.corrupt(peer, content, chunk: chunk))
        case .notHeld: return handle(.notHeld(peer, content, chunk: chunk))
        }
    }

    /// Answers the peers in turn, oldest request first, until none has anything outstanding.
    mutating func answerAll(_ peers: [Int], answer: (Int, Int) -> Answer = { _, _ in .verified }) {
        var rounds = 0
        while peers.contains(where: { !(outstanding[$0]?.isEmpty ?? true) }) {
            for peer in peers {
                guard let chunk = outstanding[peer]?.first?.chunk else { continue }
                self.answer(peer, answer(peer, chunk))
            }
            rounds += 1
            precondition(rounds < 100_000, "no end to the answers")
        }
    }

    enum Answer { case verified, corrupt, notHeld }
}

/// `count` chunks of 100 bytes, the last one 50.
func testLayout(_ count: Int) -> TransferLayout {
    TransferLayout(totalByteCount: UInt64(count) * 100 - 50, chunkByteCount: 100)
}

func configuration(_ change: (inout TransferConfiguration) -> Void) -> TransferConfiguration {
    var configuration = TransferConfiguration()
    change(&configuration)
    return configuration
}

@Suite("TransferCore: downloads from one and several peers")
struct TransferCoreTests {
    @Test("One peer: every chunk asked once, progress climbs to the total, then complete")
    func singlePeer() {
        var harness = TransferCoreHarness()
        harness.handle(.wanted("c", testLayout(20)))
        harness.connect(1)
        #expect(harness.core.requestsInFlight(to: 1) == 4)
        harness.answerAll([1])
        let asked = harness.actions.requested(of: 1)
        #expect(asked.sorted() == Array(0..<20))
        #expect(harness.actions.last == .completed("c"))
        let progress = harness.actions.progress()
        #expect(progress.first == 0 && progress.last == 1_950)
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0 < $1 })
        #expect(harness.core.contents.isEmpty && harness.core.requestsInFlight == 0)
        #expect(harness.core.statistics.chunksVerified == 20)
        // The window opened up as the peer answered: 4, then up to 8.
        #expect(harness.core.window(of: 1) == 8)
    }

    @Test("The download asks every connected peer what it holds, and new peers as they come")
    func asksHoldings() {
        var harness = TransferCoreHarness()
        harness.handle(.connected(2))
        harness.handle(.connected(1))
        #expect(harness.handle(.wanted("c", testLayout(4))).contains(.ask(1, "c")))
        #expect(harness.actions.filter { if case .ask = $0 { true } else { false } } == [.ask(1, "c"), .ask(2, "c")])
        #expect(harness.handle(.connected(3)) == [.ask(3, "c")])
        // Not paused while the peers asked have not answered.
        #expect(harness.actions.pauses().isEmpty)
        harness.handle(.holdings(1, "c", .chunks(TransferChunkSet(chunkCount: 4))))
        harness.handle(.holdings(2, "c", .chunks(TransferChunkSet(chunkCount: 4))))
        #expect(harness.actions.pauses().isEmpty)
        harness.handle(.holdings(3, "c", .chunks(TransferChunkSet(chunkCount: 4))))
        #expect(harness.actions.pauses() == [.noSource])
    }

    @Test("Two peers share the load, each chunk asked once")
    func twoPeersShare() {
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 0 })
        harness.handle(.wanted("c", testLayout(40)))
        harness.connect(1)
        harness.connect(2)
        harness.answerAll([1, 2])
        let one = harness.actions.requested(of: 1), two = harness.actions.requested(of: 2)
        #expect((one + two).sorted() == Array(0..<40))
        #expect(one.count >= 15 && two.count >= 15)
        #expect(harness.actions.last == .completed("c"))
    }

    @Test("Peers that hold part of the content are asked only for what they hold")
    func partialHoldings() {
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 0 })
        harness.handle(.wanted("c", testLayout(20)))
        harness.connect(1, holding: .chunks(TransferChunkSet(chunkCount: 20, chunks: 0..<10)))
        harness.connect(2, holding: .chunks(TransferChunkSet(chunkCount: 20, chunks: 10..<20)))
        harness.answerAll([1, 2])
        #expect(harness.actions.requested(of: 1).sorted() == Array(0..<10))
        #expect(harness.actions.requested(of: 2).sorted() == Array(10..<20))
        #expect(harness.actions.last == .completed("c"))
    }

    @Test("A peer that disconnects mid-way: what it had in flight is asked of the other")
    func disconnectMidway() {
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 0 })
        harness.handle(.wanted("c", testLayout(40)))
        harness.connect(1)
        harness.connect(2)
        for _ in 0..<5 {
            harness.answer(1)
            harness.answer(2)
        }
        let stranded = harness.outstanding[1]!.map(\.chunk)
        #expect(!stranded.isEmpty)
        let before = harness.actions.count
        harness.disconnect(1)
        harness.answerAll([2])
        let after = Array(harness.actions[before...])
        #expect(after.requested(of: 1).isEmpty)
        #expect(Set(stranded).isSubset(of: after.requested(of: 2)))
        // Each chunk asked once, but those stranded at peer 1: once of each peer.
        #expect(harness.actions.requested().sorted() == (Array(0..<40) + stranded).sorted())
        #expect(harness.actions.last == .completed("c"))
        #expect(after.pauses().isEmpty)
    }

    @Test("Two downloads take turns at one peer")
    func downloadsTakeTurns() {
        var harness = TransferCoreHarness()
        harness.handle(.wanted("a", testLayout(10)))
        harness.handle(.wanted("b", testLayout(10)))
        harness.handle(.connected(1))
        harness.handle(.holdings(1, "a", .all))
        #expect(harness.actions.requested(of: 1, "a") == [0, 1, 2, 3])
        harness.handle(.holdings(1, "b", .all))
        harness.answer(1)
        harness.answer(1)
        #expect(harness.actions.requested(of: 1, "b") == [0, 1])
        harness.answerAll([1])
        #expect(harness.actions.contains(.completed("a")) && harness.actions.contains(.completed("b")))
        #expect(harness.actions.requested("a").sorted() == Array(0..<10))
        #expect(harness.actions.requested("b").sorted() == Array(0..<10))
    }

    @Test("A cancelled download cancels its requests and is forgotten")
    func cancelDownload() {
        var harness = TransferCoreHarness()
        harness.handle(.wanted("c", testLayout(10)))
        harness.connect(1)
        let actions = harness.handle(.cancelled("c"))
        #expect(actions == [.cancel(1, "c", chunks: [0, 1, 2, 3])])
        #expect(harness.core.contents.isEmpty && harness.core.requestsInFlight == 0)
        // Late answers are ignored.
        #expect(harness.handle(.verified(1, "c", chunk: 0)).isEmpty)
    }

    @Test("Holdings of another chunk count, and answers about unknown downloads or peers, are ignored")
    func ignoredInput() {
        var harness = TransferCoreHarness()
        harness.handle(.wanted("c", testLayout(10)))
        harness.handle(.connected(1))
        #expect(harness.handle(.holdings(1, "c", .chunks(TransferChunkSet(chunkCount: 11, chunks: 0..<11)))).isEmpty)
        #expect(harness.handle(.holdings(2, "c", .all)).isEmpty)
        #expect(harness.handle(.holdings(1, "other", .all)).isEmpty)
        #expect(harness.handle(.corrupt(1, "c", chunk: 10)).isEmpty)
        #expect(harness.handle(.verified(1, "c", chunk: -1)).isEmpty)
        #expect(harness.core.statistics.ignoredEvents == 5)
        #expect(harness.core.requestsInFlight == 0)
        // A quiet tick changes nothing.
        harness.handle(.holdings(1, "c", .all))
        #expect(harness.handle(.tick(nowMilliseconds: 1_000)).isEmpty)
    }

    @Test("Downloads past the bounds are refused")
    func bounds() {
        var harness = TransferCoreHarness(configuration: configuration {
            $0.maxDownloads = 1
            $0.maxChunkCount = 16
        })
        #expect(harness.handle(.wanted("big", testLayout(17))) == [.failed("big", .tooManyChunks)])
        harness.handle(.wanted("a", testLayout(16)))
        #expect(harness.handle(.wanted("b", testLayout(1))) == [.failed("b", .tooManyDownloads)])
        #expect(harness.core.contents == ["a"])
    }

    @Test("At most the total bound in flight, however many peers have room")
    func totalBound() {
        var harness = TransferCoreHarness(configuration: configuration {
            $0.initialWindow = 8
            $0.maxRequestsInFlight = 10
        })
        harness.handle(.wanted("c", testLayout(100)))
        // Three peers with room at once: the store resumes after they came.
        harness.handle(.storePaused)
        for peer in 1...3 { harness.connect(peer) }
        #expect(harness.core.requestsInFlight == 0)
        harness.handle(.storeResumed)
        #expect(harness.core.requestsInFlight == 10)
        #expect((1...3).map { harness.core.requestsInFlight(to: $0) } == [4, 3, 3])
        harness.answerAll([1, 2, 3])
        #expect(harness.actions.last == .completed("c"))
    }

    @Test("The faster peer gets more chunks; the slower one is not starved")
    func prefersFaster() {
        var harness = TransferCoreHarness(configuration: configuration {
            $0.maxRequestsInFlight = 4
            $0.endgameThreshold = 0
        })
        harness.handle(.wanted("c", testLayout(200)))
        harness.connect(1)
        harness.connect(2)
        // Peer 1 answers each request 10 ms after it, peer 2 after 100 ms; ticks every 10 ms.
        var due: [(time: UInt64, peer: Int, chunk: Int)] = []
        var seen = 0
        var now: UInt64 = 0
        while !harness.actions.contains(.completed("c")) && now < 1_000_000 {
            now += 10
            harness.handle(.tick(nowMilliseconds: now))
            for action in harness.actions[seen...] {
                if case .request(let peer, _, let chunks) = action {
                    for chunk in chunks { due.append((now + (peer == 1 ? 10 : 100), peer, chunk)) }
                }
            }
            seen = harness.actions.count
            for answer in due where answer.time <= now {
                harness.handle(.verified(answer.peer, "c", chunk: answer.chunk))
            }
            due.removeAll { $0.time <= now }
            for action in harness.actions[seen...] {
                if case .request(let peer, _, let chunks) = action {
                    for chunk in chunks { due.append((now + (peer == 1 ? 10 : 100), peer, chunk)) }
                }
            }
            seen = harness.actions.count
        }
        let one = harness.actions.requested(of: 1).count, two = harness.actions.requested(of: 2).count
        #expect(harness.actions.contains(.completed("c")))
        #expect(one + two == 200)
        #expect(one > 3 * two, "peer 1: \(one), peer 2: \(two)")
        // Peer 2 had a request in flight all along (about one each 100 ms of the ~700 ms).
        #expect(two >= 5, "peer 2: \(two)")
    }
}
