/// One copy of a chunk asked of one peer, in the order actions list them: by peer, then by
/// download (the order they were wanted in), then by chunk.
struct TransferCopy<Peer: Comparable>: Comparable {
    var peer: Peer
    var sequence: UInt64
    var chunk: Int

    static func < (a: TransferCopy, b: TransferCopy) -> Bool { (a.peer, a.sequence, a.chunk) < (b.peer, b.sequence, b.chunk) }
}

extension TransferCore {
    // MARK: - Asking

    /// Fills the peers' windows: one chunk at a time to the peer that would answer it soonest
    /// (a peer with nothing in flight first, so every peer keeps being measured and none is
    /// starved), until every peer's window is full, the total bound is reached or nothing is
    /// left to ask. Then one `.request` per peer and download.
    mutating func schedule() {
        guard !isStorePaused, !downloadOrder.isEmpty else { return }
        let candidates = askablePeers
        var issued: [TransferCopy<Peer>] = []
        while requestsInFlight < configuration.maxRequestsInFlight {
            var best: (peer: Peer, busy: Int, wait: UInt64)?
            for peer in candidates {
                let state = peers[peer]!
                guard state.inFlight < state.window, state.idleGeneration != generation else { continue }
                let busy = state.inFlight > 0 ? 1 : 0
                let wait = state.expectedWait
                if let current = best, (current.busy, current.wait) <= (busy, wait) { continue }
                best = (peer, busy, wait)
            }
            guard let peer = best?.peer else { break }
            guard let (sequence, chunk, isEndgameCopy) = pick(for: peer) else {
                peers[peer]!.idleGeneration = generation
                continue
            }
            assign(chunk, of: sequence, to: peer, isEndgameCopy: isEndgameCopy)
            issued.append(TransferCopy(peer: peer, sequence: sequence, chunk: chunk))
        }
        for (copy, chunks) in grouped(issued) {
            output.append(.request(copy.peer, downloads[copy.sequence]!.content, chunks: chunks))
        }
    }

    /// The next chunk to ask `peer` for: downloads take turns, starting after the one that
    /// gave the last chunk.
    private mutating func pick(for peer: Peer) -> (sequence: UInt64, chunk: Int, isEndgameCopy: Bool)? {
        let count = downloadOrder.count
        for offset in 0..<count {
            let index = (nextTurn + offset) % count
            let sequence = downloadOrder[index]
            if let (chunk, isEndgameCopy) = nextChunk(for: peer, in: sequence) {
                nextTurn = (index + 1) % count
                return (sequence, chunk, isEndgameCopy)
            }
        }
        return nil
    }

    /// The lowest open chunk of the download that `peer` holds and may be asked for; in the
    /// endgame, failing that, a chunk in flight at another peer.
    private mutating func nextChunk(for peer: Peer, in sequence: UInt64) -> (chunk: Int, isEndgameCopy: Bool)? {
        guard let holdings = peers[peer]!.holdings[sequence] else { return nil }
        downloads[sequence]!.advanceFirstOpenWord()
        let download = downloads[sequence]!
        for word in download.firstOpenWord..<download.wordCount {
            var bits = download.openBits(word) & holdings.word(word)
            while bits != 0 {
                let chunk = word * 64 + bits.trailingZeroBitCount
                bits &= bits - 1
                if download.incidents[chunk] == nil || (mayAsk(peer, for: chunk, of: download) && !shouldDefer(peer, chunk, of: download)) {
                    return (chunk, false)
                }
            }
        }
        guard download.openCount == 0, download.missingCount <= configuration.endgameThreshold else { return nil }
        for chunk in download.copies.keys.sorted() where download.copies[chunk]!.count < configuration.endgameCopies {
            if mayAsk(peer, for: chunk, of: download) && !shouldDefer(peer, chunk, of: download) { return (chunk, true) }
        }
        return nil
    }

    /// Whether `peer` (not penalized) may be asked for `chunk`, whatever its window: it holds
    /// it, does not have it in flight already, and has not sent it corrupt as often as allowed.
    func mayAsk(_ peer: Peer, for chunk: Int, of download: TransferDownload<Content, Peer>) -> Bool {
        guard let holdings = peers[peer]?.holdings[download.sequence], holdings.contains(chunk) else { return false }
        guard download.copies[chunk]?[peer] == nil else { return false }
        return (download.incidents[chunk]?.badCopies[peer] ?? 0) < configuration.maxBadCopiesPerPeerPerChunk
    }

    /// Whether `peer`, which timed out on `chunk` or sent it corrupt, should leave it to
    /// another peer that may be asked for it and has no such history with it.
    private func shouldDefer(_ peer: Peer, _ chunk: Int, of download: TransferDownload<Content, Peer>) -> Bool {
        guard let incidents = download.incidents[chunk], incidents.involves(peer) else { return false }
        return peers.keys.contains { other in
            other != peer && !penalized.contains(other) && !incidents.involves(other) && mayAsk(other, for: chunk, of: download)
        }
    }

    // MARK: - Bookkeeping of copies

    /// Records that `chunk` is asked of `peer` now.
    private mutating func assign(_ chunk: Int, of sequence: UInt64, to peer: Peer, isEndgameCopy: Bool) {
        downloads[sequence]!.copies[chunk, default: [:]][peer] = now
        downloads[sequence]!.requested.insert(chunk)
        peers[peer]!.requests[sequence, default: []].insert(chunk)
        peers[peer]!.inFlight += 1
        requestsInFlight += 1
        statistics.chunksRequested += 1
        if isEndgameCopy {
            statistics.endgameRequests += 1
        } else if downloads[sequence]!.openCount == 0 && downloads[sequence]!.missingCount <= configuration.endgameThreshold {
            generation &+= 1  // the endgame starts: peers that had nothing to do may take copies
        }
    }

    /// Forgets the copy of `chunk` asked of `peer`, if there is one, and returns when it was
    /// asked. A chunk not verified with no copy left is open again.
    @discardableResult
    mutating func release(_ peer: Peer, chunk: Int, of sequence: UInt64) -> UInt64? {
        guard let sentAt = downloads[sequence]?.copies[chunk]?.removeValue(forKey: peer) else { return nil }
        let isVerified = downloads[sequence]!.verified.contains(chunk)
        if downloads[sequence]!.copies[chunk]!.isEmpty {
            downloads[sequence]!.copies[chunk] = nil
            downloads[sequence]!.requested.remove(chunk)
            if !isVerified {
                downloads[sequence]!.firstOpenWord = min(downloads[sequence]!.firstOpenWord, chunk >> 6)
                generation &+= 1
            }
        } else if !isVerified && downloads[sequence]!.missingCount <= configuration.endgameThreshold {
            generation &+= 1  // room for another endgame copy
        }
        peers[peer]!.requests[sequence]!.remove(chunk)
        if peers[peer]!.requests[sequence]!.isEmpty { peers[peer]!.requests[sequence] = nil }
        peers[peer]!.inFlight -= 1
        requestsInFlight -= 1
        return sentAt
    }

    /// Releases these copies and tells their peers, one `.cancel` per peer and download.
    mutating func cancelRequests(_ copies: [TransferCopy<Peer>]) {
        for copy in copies { release(copy.peer, chunk: copy.chunk, of: copy.sequence) }
        statistics.chunksCancelled += copies.count
        for (copy, chunks) in grouped(copies) {
            output.append(.cancel(copy.peer, downloads[copy.sequence]!.content, chunks: chunks))
        }
    }

    /// Copies sorted and gathered by peer and download: the first copy of each group, and the
    /// group's chunks in ascending order.
    private func grouped(_ copies: [TransferCopy<Peer>]) -> [(TransferCopy<Peer>, [Int])] {
        var groups: [(TransferCopy<Peer>, [Int])] = []
        for copy in copies.sorted() {
            if let last = groups.last, last.0.peer == copy.peer, last.0.sequence == copy.sequence {
                groups[groups.count - 1].1.append(copy.chunk)
            } else {
                groups.append((copy, [copy.chunk]))
            }
        }
        return groups
    }

    // MARK: - Status

    /// Pauses downloads nothing can be asked for, resumes those that can be again, fails
    /// those whose every source served bad data.
    mutating func review() {
        for sequence in downloadOrder {
            let download = downloads[sequence]!
            let status: TransferDownload<Content, Peer>.Status
            if !download.copies.isEmpty {
                status = .downloading
                downloads[sequence]!.reviewedGeneration = nil
            } else if download.reviewedGeneration == generation {
                continue
            } else if isStorePaused {
                status = .paused(.storeFull)
            } else if hasSource(download) {
                status = .downloading
            } else if !download.awaiting.isEmpty {
                downloads[sequence]!.reviewedGeneration = generation
                continue  // some peer may yet say it holds the chunks
            } else if peers.values.contains(where: { $0.holdings[sequence].map(download.lacksSome(of:)) ?? false }) {
                // Held by connected peers, every one of which may not be asked for it.
                output.append(.failed(download.content, .corruptSources))
                remove(sequence)
                continue
            } else {
                status = .paused(download.lostSources ? .sourcesOffline : .noSource)
            }
            if download.copies.isEmpty { downloads[sequence]!.reviewedGeneration = generation }
            guard status != download.status else { continue }
            downloads[sequence]!.status = status
            switch status {
            case .downloading: output.append(.resumed(download.content))
            case .paused(let reason): output.append(.paused(download.content, reason))
            }
        }
    }

    /// Whether some chunk the download lacks may be asked of some peer (if not now, when a
    /// window or the total bound has room). For a download with nothing in flight.
    private func hasSource(_ download: TransferDownload<Content, Peer>) -> Bool {
        peers.contains { peer, state in
            guard !penalized.contains(peer), let holdings = state.holdings[download.sequence] else { return false }
            let held = download.missingCount(in: holdings)
            guard held > 0 else { return false }
            let exhausted = download.incidents.count { chunk, incidents in
                holdings.contains(chunk) && (incidents.badCopies[peer] ?? 0) >= configuration.maxBadCopiesPerPeerPerChunk
            }
            return held > exhausted
        }
    }
}
