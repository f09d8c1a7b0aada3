import Testing
@testable import WeftTransfer

@Suite("TransferCore: resume, corrupt chunks, endgame, timeouts, pauses")
struct TransferCoreRecoveryTests {
    // MARK: - Resume

    @Test("A resume asks only for the chunks not verified before, and progress starts at what was")
    func resume() {
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 0 })
        let verified = TransferChunkSet(chunkCount: 100, chunks: Array(0..<50) + [60, 70, 99])
        harness.handle(.wanted("c", testLayout(100), verified: verified))
        #expect(harness.actions.progress() == [5_250])
        harness.connect(1)
        harness.connect(2)
        harness.answerAll([1, 2])
        let asked = harness.actions.requested()
        let missing = (0..<100).filter { !verified.contains($0) }
        #expect(Set(asked) == Set(missing))
        #expect(asked.count == 47)
        #expect(harness.core.statistics.chunksRequested == 47)
        #expect(harness.actions.progress().last == 9_950)
        #expect(harness.actions.last == .completed("c"))
    }

    @Test("A download wanted with every chunk verified completes at once")
    func resumeComplete() {
        var harness = TransferCoreHarness()
        let actions = harness.handle(.wanted("c", testLayout(3), verified: .full(chunkCount: 3)))
        #expect(actions == [.progress("c", verifiedByteCount: 250, totalByteCount: 250), .completed("c")])
        #expect(harness.core.contents.isEmpty)
    }

    // MARK: - Corrupt chunks

    @Test("A corrupt chunk is asked of another peer; past the threshold its sender is penalized")
    func corruptChunks() {
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 0 })
        harness.handle(.wanted("c", testLayout(30)))
        harness.connect(1)
        harness.connect(2)
        var corrupt: [Int] = []
        var penalizedAt: Int?
        while !harness.outstanding.values.allSatisfy(\.isEmpty) {
            if let chunk = harness.outstanding[1]?.first?.chunk {
                corrupt.append(chunk)
                if harness.answer(1, .corrupt).contains(where: { if case .penalize = $0 { true } else { false } }) {
                    penalizedAt = harness.actions.count
                }
            }
            harness.answer(2)
        }
        #expect(corrupt.count == 3)
        #expect(harness.actions.contains(.penalize(1, badChunks: 3)))
        #expect(harness.core.isPenalized(1))
        // Every corrupt chunk was asked of peer 2 next, and peer 1 was asked nothing more.
        #expect(Set(corrupt).isSubset(of: harness.actions.requested(of: 2)))
        #expect(Array(harness.actions[penalizedAt!...]).requested(of: 1).isEmpty)
        #expect(harness.actions.last == .completed("c"))
        // A penalized peer that reconnects is not asked again.
        harness.disconnect(1)
        #expect(harness.handle(.connected(1)).isEmpty)
    }

    @Test("The only peer's corrupt chunk is asked again of it, up to a limit; then the download fails")
    func onlySourceCorrupt() {
        var harness = TransferCoreHarness(configuration: configuration {
            $0.maxBadChunksPerPeer = 3
            $0.maxBadCopiesPerPeerPerChunk = 2
        })
        harness.handle(.wanted("c", testLayout(10)))
        harness.connect(1)
        harness.answerAll([1]) { _, chunk in chunk == 3 ? .corrupt : .verified }
        #expect(harness.actions.requested(of: 1).filter { $0 == 3 }.count == 2)
        #expect(harness.actions.requested(of: 1).count == 11)
        #expect(harness.actions.last == .failed("c", .corruptSources))
        #expect(!harness.core.isPenalized(1))
        #expect(harness.core.contents.isEmpty)
    }

    @Test("A download whose only source is penalized fails")
    func penalizedOnlySource() {
        var harness = TransferCoreHarness(configuration: configuration { $0.maxBadChunksPerPeer = 2 })
        harness.handle(.wanted("c", testLayout(10)))
        harness.connect(1)
        harness.answer(1, .corrupt)
        let actions = harness.answer(1, .corrupt)
        #expect(actions.contains(.penalize(1, badChunks: 2)))
        #expect(actions.cancelled(at: 1).count == 3)
        #expect(actions.last == .failed("c", .corruptSources))
    }

    @Test("A peer that does not hold a chunk after all: it goes to another, and is not asked again")
    func notHeld() {
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 0 })
        harness.handle(.wanted("c", testLayout(12)))
        harness.connect(1)
        harness.connect(2)
        harness.answer(1, .notHeld)  // chunk 0
        harness.answerAll([1, 2])
        #expect(harness.actions.requested(of: 1).filter { $0 == 0 }.count == 1)
        #expect(harness.actions.requested(of: 2).contains(0))
        #expect(harness.actions.last == .completed("c"))
    }

    // MARK: - Endgame

    @Test("Endgame: the last chunks are asked of a second peer; the losing copies are cancelled")
    func endgame() {
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 4 })
        harness.handle(.wanted("c", testLayout(10)))
        harness.connect(1)
        harness.connect(2)
        #expect(harness.actions.requested(of: 1) == [0, 1, 2, 3])
        #expect(harness.actions.requested(of: 2) == [4, 5, 6, 7])
        // Peer 2 is slow: peer 1 answers everything it is asked, and then gets peer 2's chunks.
        while !(harness.outstanding[1]?.isEmpty ?? true) {
            let actions = harness.answer(1)
            #expect(actions.requested(of: 2).isEmpty)
        }
        #expect(harness.core.statistics.endgameRequests == 4)
        #expect(harness.actions.requested(of: 1).suffix(4) == [4, 5, 6, 7])
        #expect(harness.actions.cancelled(at: 2) == [4, 5, 6, 7])
        #expect(harness.actions.last == .completed("c"))
        #expect(harness.core.requestsInFlight == 0)
        // Peer 2's copies arriving after all count nothing.
        #expect(harness.handle(.verified(2, "c", chunk: 1)).isEmpty)
    }

    @Test("No endgame copies while chunks are still open")
    func noEarlyEndgame() {
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 4 })
        harness.handle(.wanted("c", testLayout(40)))
        harness.connect(1)
        harness.connect(2)
        for _ in 0..<20 { harness.answer(1) }
        #expect(harness.core.statistics.endgameRequests == 0)
    }

    // MARK: - Timeouts

    @Test("A request not answered in time is cancelled and given to another peer; the slow peer's window halves")
    func timeouts() {
        var harness = TransferCoreHarness(configuration: configuration {
            $0.requestTimeoutMilliseconds = 1_000
            $0.endgameThreshold = 0
        })
        harness.handle(.tick(nowMilliseconds: 0))
        harness.handle(.wanted("c", testLayout(30)))
        harness.connect(1)
        harness.connect(2)
        let slow = harness.outstanding[1]!.map(\.chunk)
        #expect(slow == [0, 1, 2, 3])
        harness.handle(.tick(nowMilliseconds: 500))
        #expect(harness.actions.cancelled(at: 1).isEmpty)
        for _ in 0..<4 { harness.answer(2) }  // peer 2 answers and gets more, asked at 500
        let before = harness.actions.count
        let timedOut = harness.handle(.tick(nowMilliseconds: 1_000))
        #expect(timedOut.first == .cancel(1, "c", chunks: slow))
        #expect(timedOut.cancelled(at: 2).isEmpty)
        #expect(harness.core.window(of: 1) == 2)
        #expect(harness.core.statistics.timeouts == 4)
        // Peer 1 now gets other chunks; the timed-out ones go to peer 2.
        harness.answerAll([1, 2])
        let after = Array(harness.actions[before...])
        #expect(Set(slow).isSubset(of: after.requested(of: 2)))
        #expect(Set(slow).isDisjoint(with: after.requested(of: 1)))
        #expect(harness.actions.last == .completed("c"))
    }

    @Test("The only peer's timed-out request is asked of it again")
    func timeoutOnlyPeer() {
        var harness = TransferCoreHarness(configuration: configuration { $0.requestTimeoutMilliseconds = 1_000 })
        harness.handle(.tick(nowMilliseconds: 0))
        harness.handle(.wanted("c", testLayout(4)))
        harness.connect(1)
        let actions = harness.handle(.tick(nowMilliseconds: 2_000))
        #expect(actions == [.cancel(1, "c", chunks: [0, 1, 2, 3]), .request(1, "c", chunks: [0, 1])])
        #expect(harness.core.window(of: 1) == 2)
    }

    // MARK: - Pauses

    @Test("Paused while no peer holds the content, resumed when one does; sources offline when it leaves")
    func pauseWithoutSource() {
        var harness = TransferCoreHarness()
        #expect(harness.handle(.wanted("c", testLayout(8))).pauses() == [.noSource])
        harness.connect(1, holding: .chunks(TransferChunkSet(chunkCount: 8)))
        #expect(harness.actions.pauses() == [.noSource])
        #expect(harness.actions.requested().isEmpty)
        let actions = harness.connect(2)
        #expect(actions.contains(.resumed("c")))
        #expect(actions.requested(of: 2) == [0, 1, 2, 3])
        harness.answer(2)
        harness.disconnect(2)
        #expect(harness.actions.pauses() == [.noSource, .sourcesOffline])
        #expect(harness.core.pauseReason(of: "c") == .sourcesOffline)
        // Peer 1 gets chunk 5; asked for it alone.
        let more = harness.handle(.holdings(1, "c", .chunks(TransferChunkSet(chunkCount: 8, chunks: [5]))))
        #expect(more.requested(of: 1) == [5])
        #expect(more.resumptions() == 1)
        harness.answer(1)
        #expect(harness.actions.pauses() == [.noSource, .sourcesOffline, .sourcesOffline])
        #expect(harness.core.progress(of: "c")?.verifiedByteCount == 200)
    }

    @Test("A peer asked what it holds that never answers holds the pause back for a timeout at most")
    func silentPeer() {
        var harness = TransferCoreHarness(configuration: configuration { $0.requestTimeoutMilliseconds = 1_000 })
        harness.handle(.connected(1))
        harness.handle(.tick(nowMilliseconds: 0))
        harness.handle(.wanted("c", testLayout(8)))
        harness.handle(.tick(nowMilliseconds: 999))
        #expect(harness.actions.pauses().isEmpty)
        harness.handle(.tick(nowMilliseconds: 1_000))
        #expect(harness.actions.pauses() == [.noSource])
    }

    @Test("Store full: requests are cancelled and the download pauses; it carries on when the store resumes")
    func storeFull() {
        var harness = TransferCoreHarness()
        harness.handle(.wanted("c", testLayout(20)))
        harness.connect(1)
        harness.answer(1)
        let paused = harness.handle(.storePaused)
        #expect(paused == [.cancel(1, "c", chunks: [1, 2, 3, 4, 5]), .paused("c", .storeFull)])
        // A copy that was written before the pause still counts; nothing is asked meanwhile.
        #expect(harness.handle(.verified(1, "c", chunk: 1)).progress() == [200])
        #expect(harness.handle(.tick(nowMilliseconds: 60_000)).isEmpty)
        harness.handle(.connected(2))
        #expect(harness.handle(.holdings(2, "c", .all)).isEmpty)
        #expect(harness.core.pauseReason(of: "c") == .storeFull)
        let resumed = harness.handle(.storeResumed)
        #expect(resumed.contains(.resumed("c")))
        #expect(Set(resumed.requested()) == Set(2..<11))
        harness.answerAll([1, 2])
        #expect(harness.actions.requested().filter { $0 == 1 }.count == 1)
        #expect(harness.actions.last == .completed("c"))
    }

    // MARK: - Progress

    @Test("Progress never goes backwards, counts each chunk once, and ends exactly at the total")
    func progressExact() {
        let lengths: [UInt32] = [7, 100, 3, 0, 50, 1_000, 1, 64, 9, 12]
        var harness = TransferCoreHarness(configuration: configuration { $0.endgameThreshold = 10 })
        harness.handle(.wanted("c", TransferLayout(chunkByteCounts: lengths)))
        harness.connect(1)
        harness.connect(2)
        // Every chunk arrives from both peers, asked or not.
        for chunk in 0..<10 {
            harness.handle(.verified(1, "c", chunk: chunk))
            harness.handle(.verified(2, "c", chunk: chunk))
        }
        let progress = harness.actions.progress()
        #expect(progress == [0] + lengths.indices.map { index in lengths[...index].reduce(0) { $0 + UInt64($1) } })
        #expect(progress.last == 1_246)
        #expect(harness.core.statistics.chunksVerified == 10)
        #expect(harness.actions.last == .completed("c"))
        #expect(harness.core.requestsInFlight == 0)
    }

    @Test("Layouts: uniform with a short last chunk, exact multiples, explicit lengths")
    func layouts() {
        let uniform = TransferLayout(totalByteCount: 1_050, chunkByteCount: 100)
        #expect(uniform.chunkCount == 11 && uniform.byteCount(ofChunk: 10) == 50 && uniform.byteCount(ofChunk: 9) == 100)
        #expect(uniform.byteCount(of: TransferChunkSet(chunkCount: 11, chunks: [0, 10])) == 150)
        let exact = TransferLayout(totalByteCount: 1_000, chunkByteCount: 100)
        #expect(exact.chunkCount == 10 && exact.byteCount(ofChunk: 9) == 100)
        #expect(exact.byteCount(of: .full(chunkCount: 10)) == 1_000)
        #expect(TransferLayout(totalByteCount: 0, chunkByteCount: 100).chunkCount == 0)
        let explicit = TransferLayout(chunkByteCounts: [5, 6, 7])
        #expect(explicit.totalByteCount == 18 && explicit.byteCount(of: TransferChunkSet(chunkCount: 3, chunks: [1, 2])) == 13)
    }

    @Test("Chunk sets")
    func chunkSets() {
        var set = TransferChunkSet(chunkCount: 130)
        #expect(set.insert(129) && set.insert(0) && set.insert(64) && !set.insert(64))
        #expect(Array(set) == [0, 64, 129] && set.count == 3)
        #expect(set.remove(64) && !set.remove(64) && !set.contains(64) && !set.contains(500))
        let full = TransferChunkSet.full(chunkCount: 130)
        #expect(full.isFull && Array(full) == Array(0..<130))
        #expect(TransferHoldings.all.removing(3, chunkCount: 5) == .chunks(TransferChunkSet(chunkCount: 5, chunks: [0, 1, 2, 4])))
    }
}
