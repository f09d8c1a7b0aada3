/// The transfer scheduler of one node: which chunk of which content to ask which peer for.
/// Events in, actions out (SPEC.md, "Rich content transfer: scheduling"). No sockets, no files,
/// no clock, no randomness: the driver feeds it the user's downloads, connection events,
/// verified and corrupt chunks and timer ticks, carries out its actions in order, and does the
/// verifying and writing itself. The same events give the same actions.
///
/// It spreads requests over the peers that hold the chunks, a window of them in flight per
/// peer, preferring peers that answer sooner; moves requests that time out or whose peer
/// leaves to other peers; asks for the last chunks twice (endgame); re-asks corrupt chunks of
/// other peers and penalizes peers that keep sending them; and pauses downloads nobody can
/// serve. Everything it keeps is bounded by `TransferConfiguration`: at most `maxDownloads`
/// downloads (a few bitsets of `maxChunkCount` bits each), `maxPeers` peers (a holdings bitset
/// per download each), `maxRequestsInFlight` requests.
public struct TransferCore<Content: Hashable & Sendable, Peer: Hashable & Sendable & Comparable>: Sendable {
    public typealias Event = TransferEvent<Content, Peer>
    public typealias Action = TransferAction<Content, Peer>

    public let configuration: TransferConfiguration

    var downloads: [UInt64: TransferDownload<Content, Peer>] = [:]
    var sequences: [Content: UInt64] = [:]
    /// The downloads' sequences, in the order they were wanted.
    var downloadOrder: [UInt64] = []
    var nextSequence: UInt64 = 0
    /// Where the next pick of a chunk starts in `downloadOrder`: downloads take turns.
    var nextTurn = 0
    var peers: [Peer: TransferPeer] = [:]
    var penalized: Set<Peer> = []
    var penalizedOrder: [Peer] = []
    /// Copies in flight over all downloads and peers.
    public internal(set) var requestsInFlight = 0
    public internal(set) var isStorePaused = false
    /// The latest tick's time.
    var now: UInt64 = 0
    /// Counts changes that may give a peer something new to ask for, or a download without
    /// requests in flight another status: a chunk open again, holdings, peers, the store,
    /// the endgame's start. Peers that found nothing to ask for, and downloads reviewed, at
    /// the current count are not looked at again (their bitsets not scanned) until it moves.
    var generation: UInt64 = 0
    public internal(set) var statistics = TransferStatistics()

    /// Actions of the event being handled, in order.
    var output: [Action] = []

    /// A core with no download and no peer: what a node builds at start. Downloads that were
    /// under way before a restart are wanted again with what the store holds verified.
    public init(configuration: TransferConfiguration = TransferConfiguration()) {
        // The node's own configuration, never input: a programming error stops here.
        precondition(configuration.isValid, "invalid transfer configuration \(configuration)")
        self.configuration = configuration
    }

    /// Handles one event and returns the actions it calls for, in order.
    public mutating func handle(_ event: Event) -> [Action] {
        switch event {
        case .verified, .tick: break  // these count their own changes
        default: generation &+= 1
        }
        switch event {
        case .wanted(let content, let layout, let verified):
            want(content, layout: layout, verified: verified)
        case .cancelled(let content):
            cancel(content)
        case .connected(let peer):
            connect(peer)
        case .disconnected(let peer):
            disconnect(peer)
        case .holdings(let peer, let content, let holdings):
            record(holdings, of: peer, for: content)
        case .verified(let peer, let content, let chunk):
            verified(chunk, of: content, from: peer)
        case .corrupt(let peer, let content, let chunk):
            corrupt(chunk, of: content, from: peer)
        case .notHeld(let peer, let content, let chunk):
            notHeld(chunk, of: content, by: peer)
        case .tick(let nowMilliseconds):
            tick(nowMilliseconds)
        case .storePaused:
            pauseStore()
        case .storeResumed:
            isStorePaused = false
        }
        schedule()
        review()
        defer { output = [] }
        return output
    }

    // MARK: - Downloads

    private mutating func want(_ content: Content, layout: TransferLayout, verified: TransferChunkSet?) {
        guard sequences[content] == nil else {
            statistics.ignoredEvents += 1
            return
        }
        guard layout.chunkCount <= configuration.maxChunkCount else {
            output.append(.failed(content, .tooManyChunks))
            return
        }
        guard downloads.count < configuration.maxDownloads else {
            output.append(.failed(content, .tooManyDownloads))
            return
        }
        let verified = verified ?? TransferChunkSet(chunkCount: layout.chunkCount)
        // The caller builds both from one descriptor (the driver: the journal opened with its
        // layout): not input.
        precondition(verified.chunkCount == layout.chunkCount, "verified chunks of another layout")
        let download = TransferDownload<Content, Peer>(
            content: content, sequence: nextSequence, layout: layout, verified: verified)
        output.append(.progress(content, verifiedByteCount: download.verifiedByteCount, totalByteCount: layout.totalByteCount))
        guard !download.isComplete else {
            output.append(.completed(content))
            return
        }
        nextSequence += 1
        downloads[download.sequence] = download
        sequences[content] = download.sequence
        downloadOrder.append(download.sequence)
        for peer in askablePeers {
            output.append(.ask(peer, content))
            downloads[download.sequence]!.awaiting[peer] = now
        }
    }

    private mutating func cancel(_ content: Content) {
        guard let sequence = sequences[content] else {
            statistics.ignoredEvents += 1
            return
        }
        var cancelled: [TransferCopy<Peer>] = []
        for (chunk, copies) in downloads[sequence]!.copies {
            for peer in copies.keys { cancelled.append(TransferCopy(peer: peer, sequence: sequence, chunk: chunk)) }
        }
        cancelRequests(cancelled)
        remove(sequence)
    }

    /// Forgets a download that nothing is in flight for.
    mutating func remove(_ sequence: UInt64) {
        guard let download = downloads.removeValue(forKey: sequence) else { return }
        // The core's own invariant: every path here cancels or releases the copies first.
        precondition(download.copies.isEmpty, "removing a download with requests in flight")
        sequences[download.content] = nil
        let index = downloadOrder.firstIndex(of: sequence)!
        downloadOrder.remove(at: index)
        if nextTurn > index { nextTurn -= 1 }
        if nextTurn >= downloadOrder.count { nextTurn = 0 }
        for peer in peers.keys { peers[peer]!.holdings[sequence] = nil }
    }

    // MARK: - Peers

    private mutating func connect(_ peer: Peer) {
        guard peers[peer] == nil, peers.count < configuration.maxPeers else {
            statistics.ignoredEvents += 1
            return
        }
        peers[peer] = TransferPeer(window: configuration.initialWindow)
        guard !penalized.contains(peer) else { return }
        for sequence in downloadOrder {
            output.append(.ask(peer, downloads[sequence]!.content))
            downloads[sequence]!.awaiting[peer] = now
        }
    }

    private mutating func disconnect(_ peer: Peer) {
        guard let state = peers[peer] else {
            statistics.ignoredEvents += 1
            return
        }
        for (sequence, chunks) in state.requests {
            for chunk in chunks { release(peer, chunk: chunk, of: sequence) }
        }
        for sequence in downloadOrder {
            downloads[sequence]!.awaiting[peer] = nil
            if !penalized.contains(peer), let holdings = state.holdings[sequence], downloads[sequence]!.lacksSome(of: holdings) {
                downloads[sequence]!.lostSources = true
            }
        }
        peers[peer] = nil
    }

    private mutating func record(_ holdings: TransferHoldings, of peer: Peer, for content: Content) {
        guard peers[peer] != nil, let sequence = sequences[content] else {
            statistics.ignoredEvents += 1
            return
        }
        if case .chunks(let set) = holdings, set.chunkCount != downloads[sequence]!.chunkCount {
            statistics.ignoredEvents += 1
            return
        }
        peers[peer]!.holdings[sequence] = holdings
        downloads[sequence]!.awaiting[peer] = nil
    }

    /// Peers that may be asked for something, in order.
    var askablePeers: [Peer] { peers.keys.filter { !penalized.contains($0) }.sorted() }

    // MARK: - The store

    private mutating func pauseStore() {
        guard !isStorePaused else { return }
        isStorePaused = true
        var cancelled: [TransferCopy<Peer>] = []
        for (sequence, download) in downloads {
            for (chunk, copies) in download.copies {
                for peer in copies.keys { cancelled.append(TransferCopy(peer: peer, sequence: sequence, chunk: chunk)) }
            }
        }
        cancelRequests(cancelled)
    }

    // MARK: - Timeouts

    private mutating func tick(_ nowMilliseconds: UInt64) {
        now = max(now, nowMilliseconds)
        let timeout = configuration.requestTimeoutMilliseconds
        var expired: [TransferCopy<Peer>] = []
        for (peer, state) in peers {
            for (sequence, chunks) in state.requests {
                for chunk in chunks where now - downloads[sequence]!.copies[chunk]![peer]! >= timeout {
                    expired.append(TransferCopy(peer: peer, sequence: sequence, chunk: chunk))
                }
            }
        }
        var slowPeers: Set<Peer> = []
        for copy in expired {
            slowPeers.insert(copy.peer)
            downloads[copy.sequence]!.incidents[copy.chunk, default: TransferIncidents()].slow.insert(copy.peer)
            peers[copy.peer]!.record(roundTrip: timeout)
        }
        for peer in slowPeers {
            peers[peer]!.window = max(configuration.minWindow, peers[peer]!.window / 2)
        }
        statistics.timeouts += expired.count
        cancelRequests(expired)
        for sequence in downloadOrder {
            let awaiting = downloads[sequence]!.awaiting
            guard awaiting.values.contains(where: { now - $0 >= timeout }) else { continue }
            downloads[sequence]!.awaiting = awaiting.filter { now - $0.value < timeout }
            generation &+= 1
        }
    }

    // MARK: - Queries

    /// The downloads under way, in the order they were wanted.
    public var contents: [Content] { downloadOrder.map { downloads[$0]!.content } }

    /// Bytes of the content verified, and its total; nil if it is not being downloaded.
    public func progress(of content: Content) -> (verifiedByteCount: UInt64, totalByteCount: UInt64)? {
        guard let sequence = sequences[content], let download = downloads[sequence] else { return nil }
        return (download.verifiedByteCount, download.layout.totalByteCount)
    }

    /// Why the download waits; nil while it is being asked for (or is not under way).
    public func pauseReason(of content: Content) -> TransferPauseReason? {
        guard let sequence = sequences[content], case .paused(let reason) = downloads[sequence]?.status else { return nil }
        return reason
    }

    /// The connected peers, in order.
    public var connectedPeers: [Peer] { peers.keys.sorted() }

    /// Requests unanswered at the peer (0 for a peer not connected).
    public func requestsInFlight(to peer: Peer) -> Int { peers[peer]?.inFlight ?? 0 }

    /// How many requests the peer may have unanswered at once; nil for a peer not connected.
    public func window(of peer: Peer) -> Int? { peers[peer]?.window }

    /// Whether the peer was penalized for corrupt chunks (and is asked for nothing).
    public func isPenalized(_ peer: Peer) -> Bool { penalized.contains(peer) }
}

/// Counters a node's tests and benchmarks read.
public struct TransferStatistics: Sendable, Hashable {
    public init() {}

    /// Chunks asked of peers (a request for several chunks counts each), endgame copies included.
    public var chunksRequested = 0
    /// Of those, the endgame's second copies.
    public var endgameRequests = 0
    /// Chunks verified for the first time.
    public var chunksVerified = 0
    /// Verified chunks that were verified already (a copy that arrived after another).
    public var duplicateChunks = 0
    /// Chunks that failed verification.
    public var corruptChunks = 0
    /// Requests that timed out.
    public var timeouts = 0
    /// Chunks whose requests the core cancelled (timeouts, endgame losers, pauses, cancels).
    public var chunksCancelled = 0
    /// Peers penalized for corrupt chunks.
    public var peersPenalized = 0
    /// Events about unknown downloads or peers, duplicates, holdings of the wrong size.
    public var ignoredEvents = 0
}
