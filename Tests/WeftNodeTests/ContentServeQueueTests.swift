import NIOCore
import NIOEmbedded
import Testing
import WeftCrypto
import WeftModel
@testable import WeftNode
import WeftSync
import WeftTransfer

/// What a peer can make a node hold when it asks for content (SPEC.md §17.8), and what the
/// content service reports of progress.
@Suite("Content serving bounds and progress")
struct ContentServeQueueTests {
    static func link(_ identity: PublicIdentity, number: ConnectionNumber = 1) -> ContentLink {
        let connection = PeerConnection(identity: identity, channel: EmbeddedChannel())
        return ContentLink(
            identity: identity, number: number,
            outbox: PeerOutbox(connection: connection, highWatermark: 1 << 20, lowWatermark: 1 << 18),
            send: { _ in }, fail: { _ in })
    }

    static let root = ContentRoot(bytes: Array(repeating: 3, count: 32))!
    static let other = ContentRoot(bytes: Array(repeating: 4, count: 32))!

    @Test("chunks and manifests asked and not yet sent are bounded per peer identity, over all its connections; cancelling and sending make room")
    func bounds() async {
        let identity = NodeIdentity.generate().publicKey
        let budget = ContentServeBudget(maxChunks: 64, maxManifests: 4)
        let first = ContentServeQueue(link: Self.link(identity, number: 1), budget: budget, maxHoldings: 2, maxInterests: 2)
        let second = ContentServeQueue(link: Self.link(identity, number: 2), budget: budget, maxHoldings: 2, maxInterests: 2)
        #expect(first.askChunks((0..<UInt32(40)).map { $0 }, of: Self.root) == 0)
        #expect(second.askChunks((0..<UInt32(40)).map { $0 }, of: Self.other) == 16, "64 in all for the identity")
        #expect(budget.held(by: identity).chunks == 64)
        #expect(first.askChunks([100], of: Self.root) == 1)

        first.cancel([0, 1, 2, 99], of: Self.root)
        #expect(budget.held(by: identity).chunks == 61, "three cancelled (99 was never asked)")
        #expect(first.askChunks([200, 201, 202, 203], of: Self.root) == 1)

        for _ in 0..<4 { #expect(first.askManifest(Self.root)) }
        #expect(!second.askManifest(Self.other), "four manifests at most")

        // HOLDINGS first, once per content, at most two waiting.
        #expect(first.askHoldings(Self.root))
        #expect(first.askHoldings(Self.root))
        #expect(first.askHoldings(Self.other))
        #expect(!first.askHoldings(ContentRoot(bytes: Array(repeating: 5, count: 32))!))
        var jobs: [ContentServeQueue.Job] = []
        for _ in 0..<3 {
            guard let job = await first.next() else { break }
            jobs.append(job)
            first.done(job)
        }
        #expect(jobs == [.holdings(Self.root), .holdings(Self.other), .manifest(Self.root)])
        #expect(budget.held(by: identity).manifests == 3)
        #expect(second.askManifest(Self.other), "room again once one was sent")

        // A connection that ends gives back what it held.
        first.close()
        second.close()
        #expect(budget.held(by: identity).chunks == 0 && budget.held(by: identity).manifests == 0)
        #expect(await first.next() == nil)
        #expect(first.askChunks([1], of: Self.root) == 0, "a closed queue takes nothing, and drops nothing against the bound")
        #expect(budget.held(by: identity).chunks == 0 && budget.held(by: identity).manifests == 0)
    }

    @Test("a server waiting for work takes a request as it comes; interests are told again once, then forgotten when complete")
    func handOffAndInterests() async {
        let identity = NodeIdentity.generate().publicKey
        let queue = ContentServeQueue(
            link: Self.link(identity), budget: ContentServeBudget(maxChunks: 8, maxManifests: 1), maxHoldings: 8, maxInterests: 1)
        async let job = queue.next()
        try? await Task.sleep(for: .milliseconds(20))
        queue.askChunks([7], of: Self.root)
        #expect(await job == .chunk(Self.root, 7))

        queue.remember(Self.root)
        queue.remember(Self.other)  // one interest at most: the oldest goes
        queue.holdMore(of: Self.root, isComplete: false)
        queue.holdMore(of: Self.other, isComplete: true)
        queue.holdMore(of: Self.other, isComplete: true)
        #expect(await queue.next() == .holdings(Self.other))
        queue.close()
        #expect(await queue.next() == nil)
    }

    @Test("progress never goes back, ends at exactly 1, and adds up over parts weighted by size")
    func progress() async {
        let board = ContentBoard()
        let stream = board.watch(Self.root, initial: nil, isOver: false)
        board.begin(Self.root, totalBytes: 1000, status: .downloading)
        board.advance(Self.root, verifiedBytes: 400)
        board.advance(Self.root, verifiedBytes: 300)  // a resume that knows less: not shown
        board.addWire(Self.root, bytes: 120)
        board.complete(Self.root, totalBytes: 1000)
        var values: [ContentProgress] = []
        for await value in stream { values.append(value) }
        #expect(!values.isEmpty)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.verifiedBytes <= $1.verifiedBytes })
        #expect(values.last?.fraction == 1.0)
        #expect(values.last?.wireBytes == 120)
        #expect(board.status(of: Self.root) == .complete)

        let parts = [
            ContentProgress(verifiedBytes: 100, totalBytes: 100), ContentProgress(verifiedBytes: 0, totalBytes: 300),
            ContentProgress(verifiedBytes: 300, totalBytes: 600),
        ]
        #expect(ContentProgress.aggregate(parts).fraction == 0.4)
    }

    @Test("a download being opened tells no progress until its files are read: a watcher of a resumed download never sees it start from 0")
    func openingTellsNothing() async {
        // Watched before it starts: opening says nothing (closing the board ends the stream
        // with whatever it was told).
        let board = ContentBoard()
        let early = board.watch(Self.root, initial: nil, isOver: false)
        board.beginOpening(Self.root, totalBytes: 1000)
        #expect(board.status(of: Self.root) == .downloading)
        #expect(board.progress(of: Self.root) == nil, "not known yet")
        // Watched while it opens: told nothing until its files are read, then what they hold.
        let during = board.watch(Self.root, initial: nil, isOver: false)
        board.close()
        var told: [ContentProgress] = []
        for await value in early { told.append(value) }
        for await value in during { told.append(value) }
        #expect(told.isEmpty, "\(told)")

        let resumed = ContentBoard()
        resumed.beginOpening(Self.root, totalBytes: 1000)
        let watcher = resumed.watch(Self.root, initial: nil, isOver: false)
        resumed.advance(Self.root, verifiedBytes: 600)  // the journal held 600 bytes
        resumed.close()
        var values: [ContentProgress] = []
        for await value in watcher { values.append(value) }
        #expect(values.map(\.verifiedBytes) == [600])

        // A fresh download opened with nothing held says 0 of its size once opened.
        let fresh = ContentBoard()
        fresh.beginOpening(Self.other, totalBytes: 50)
        let freshWatcher = fresh.watch(Self.other, initial: nil, isOver: false)
        fresh.advance(Self.other, verifiedBytes: 0)
        fresh.close()
        var freshValues: [ContentProgress] = []
        for await value in freshWatcher { freshValues.append(value) }
        #expect(freshValues == [ContentProgress(verifiedBytes: 0, totalBytes: 50)])
    }

    @Test("an upload is awaiting, then uploading, then complete once every chunk was sent")
    func upload() throws {
        let board = ContentBoard()
        let descriptor = try ContentDescriptor(byteCount: 40_000, chunkLog: 14, root: Self.root)
        board.added(descriptor)
        #expect(board.status(of: Self.root) == .awaitingUpload)
        board.sent(Self.root, chunk: 1, wireBytes: 500)
        #expect(board.status(of: Self.root) == .uploading)
        board.sent(Self.root, chunk: 1, wireBytes: 500)
        #expect(board.progress(of: Self.root)?.verifiedBytes == 16_384, "a chunk sent twice counts once")
        board.sent(Self.root, chunk: 0, wireBytes: 500)
        board.sent(Self.root, chunk: 2, wireBytes: 500)
        #expect(board.status(of: Self.root) == .complete)
        #expect(board.progress(of: Self.root)?.fraction == 1.0)
        #expect(board.progress(of: Self.root)?.wireBytes == 2_000)
    }
}
