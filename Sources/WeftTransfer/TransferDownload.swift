/// One download under way: which chunks are verified, which are asked of whom since when,
/// what went wrong with which chunk.
struct TransferDownload<Content: Hashable & Sendable, Peer: Hashable & Sendable & Comparable>: Sendable {
    enum Status: Hashable {
        case downloading
        case paused(TransferPauseReason)
    }

    let content: Content
    /// The order downloads were wanted in: what sorts them wherever order shows in actions.
    let sequence: UInt64
    let layout: TransferLayout
    var verified: TransferChunkSet
    var verifiedByteCount: UInt64
    /// Chunks with at least one copy in flight: the keys of `copies`, as a bitset.
    var requested: TransferChunkSet
    /// Copies in flight: per chunk, the peers asked for it and when (the tick's time).
    var copies: [Int: [Peer: UInt64]] = [:]
    /// Chunks that timed out at a peer or arrived corrupt, and from whom. Cleared when the
    /// chunk is verified.
    var incidents: [Int: TransferIncidents<Peer>] = [:]
    /// Peers asked which chunks they hold that have not said yet, and when they were asked:
    /// the download does not pause or fail on their account until they answer or time out.
    var awaiting: [Peer: UInt64] = [:]
    /// No word before this one holds an open chunk (neither verified nor requested).
    var firstOpenWord = 0
    var status = Status.downloading
    /// A peer holding chunks the content lacks disconnected since the download was wanted.
    var lostSources = false
    /// The core's `generation` when the download's status was last worked out with nothing
    /// in flight: until it moves, the answer is the same.
    var reviewedGeneration: UInt64?

    init(content: Content, sequence: UInt64, layout: TransferLayout, verified: TransferChunkSet) {
        self.content = content
        self.sequence = sequence
        self.layout = layout
        self.verified = verified
        self.verifiedByteCount = layout.byteCount(of: verified)
        self.requested = TransferChunkSet(chunkCount: layout.chunkCount)
    }

    var chunkCount: Int { layout.chunkCount }
    var wordCount: Int { (layout.chunkCount + 63) / 64 }
    var missingCount: Int { layout.chunkCount - verified.count }
    /// Chunks neither verified nor in flight.
    var openCount: Int { missingCount - copies.count }
    var isComplete: Bool { verified.isFull }

    /// The open chunks of word `index`.
    func openBits(_ index: Int) -> UInt64 {
        ~verified.word(index) & ~requested.word(index) & verified.validBits(index)
    }

    /// The missing chunks of word `index`.
    func missingBits(_ index: Int) -> UInt64 {
        ~verified.word(index) & verified.validBits(index)
    }

    /// Moves `firstOpenWord` past words without open chunks.
    mutating func advanceFirstOpenWord() {
        while firstOpenWord < wordCount && openBits(firstOpenWord) == 0 { firstOpenWord += 1 }
    }

    /// Whether `holdings` include a chunk the content lacks.
    func lacksSome(of holdings: TransferHoldings) -> Bool {
        (0..<wordCount).contains { missingBits($0) & holdings.word($0) != 0 }
    }

    /// How many chunks the content lacks that `holdings` include.
    func missingCount(in holdings: TransferHoldings) -> Int {
        (0..<wordCount).reduce(0) { $0 + (missingBits($1) & holdings.word($1)).nonzeroBitCount }
    }
}

/// What went wrong with one chunk of a download, per peer.
struct TransferIncidents<Peer: Hashable & Sendable>: Sendable {
    /// Peers whose request for the chunk timed out.
    var slow: Set<Peer> = []
    /// Copies of the chunk that failed verification, per peer that sent them.
    var badCopies: [Peer: Int] = [:]

    func involves(_ peer: Peer) -> Bool { slow.contains(peer) || badCopies[peer] != nil }
}

/// A connected peer, as the scheduler sees it.
struct TransferPeer: Sendable {
    /// What it said it holds, per download (by sequence).
    var holdings: [UInt64: TransferHoldings] = [:]
    /// Chunks asked of it and not answered, per download (by sequence).
    var requests: [UInt64: Set<Int>] = [:]
    /// Their number.
    var inFlight = 0
    /// How many it may have at once.
    var window: Int
    /// Smoothed time from request to verified answer (and timeouts count as the timeout), in
    /// milliseconds; nil until it answers once.
    var roundTrip: UInt64?
    /// Chunks it sent that failed verification, over this connection.
    var badChunks = 0
    /// The core's `generation` when it last had nothing to be asked for: until it moves, it
    /// still has nothing.
    var idleGeneration: UInt64?

    init(window: Int) { self.window = window }

    /// Takes one more round-trip sample into the average (a quarter of its weight).
    mutating func record(roundTrip sample: UInt64) {
        roundTrip = roundTrip.map { $0 - $0 / 4 + sample / 4 } ?? sample
    }

    /// How long a new request would wait for its answer, roughly: the peer's queue of
    /// requests and this one, each taking a round trip. A peer not measured yet counts as fast.
    var expectedWait: UInt64 {
        let (wait, overflow) = UInt64(inFlight + 1).multipliedReportingOverflow(by: (roundTrip ?? 0) + 1)
        return overflow ? .max : wait
    }
}
