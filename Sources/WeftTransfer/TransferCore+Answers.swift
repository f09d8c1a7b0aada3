extension TransferCore {
    // MARK: - Answers

    /// A chunk verified and written by the driver: counted once, its other copies cancelled.
    mutating func verified(_ chunk: Int, of content: Content, from peer: Peer) {
        guard let sequence = sequences[content], chunk >= 0, chunk < downloads[sequence]!.chunkCount else {
            statistics.ignoredEvents += 1
            return
        }
        // Marked verified first, so that releasing its copies opens nothing.
        let isNew = downloads[sequence]!.verified.insert(chunk)
        if let sentAt = release(peer, chunk: chunk, of: sequence) {
            peers[peer]!.record(roundTrip: min(now - sentAt, configuration.requestTimeoutMilliseconds))
            peers[peer]!.window = min(configuration.maxWindow, peers[peer]!.window + 1)
        }
        guard isNew else {
            statistics.duplicateChunks += 1
            return
        }
        let losers = (downloads[sequence]!.copies[chunk] ?? [:]).keys.map { TransferCopy(peer: $0, sequence: sequence, chunk: chunk) }
        cancelRequests(losers)
        downloads[sequence]!.verifiedByteCount += downloads[sequence]!.layout.byteCount(ofChunk: chunk)
        downloads[sequence]!.incidents[chunk] = nil
        statistics.chunksVerified += 1
        let download = downloads[sequence]!
        // Endgame copies may be due, or a download with nothing in flight lack its last source.
        if download.missingCount <= configuration.endgameThreshold || download.copies.isEmpty { generation &+= 1 }
        output.append(.progress(content, verifiedByteCount: download.verifiedByteCount, totalByteCount: download.layout.totalByteCount))
        if download.isComplete {
            output.append(.completed(content))
            remove(sequence)
        }
    }

    /// A chunk that failed verification: counted against the peer, asked again (of another
    /// peer if one may be asked).
    mutating func corrupt(_ chunk: Int, of content: Content, from peer: Peer) {
        guard let sequence = sequences[content], chunk >= 0, chunk < downloads[sequence]!.chunkCount, peers[peer] != nil else {
            statistics.ignoredEvents += 1
            return
        }
        release(peer, chunk: chunk, of: sequence)
        statistics.corruptChunks += 1
        if !downloads[sequence]!.verified.contains(chunk) {
            downloads[sequence]!.incidents[chunk, default: TransferIncidents()].badCopies[peer, default: 0] += 1
        }
        peers[peer]!.badChunks += 1
        if peers[peer]!.badChunks >= configuration.maxBadChunksPerPeer && !penalized.contains(peer) {
            penalize(peer)
        }
    }

    /// The peer does not hold the chunk after all: it is asked of others.
    mutating func notHeld(_ chunk: Int, of content: Content, by peer: Peer) {
        guard let sequence = sequences[content], chunk >= 0, chunk < downloads[sequence]!.chunkCount, peers[peer] != nil else {
            statistics.ignoredEvents += 1
            return
        }
        release(peer, chunk: chunk, of: sequence)
        if let holdings = peers[peer]!.holdings[sequence] {
            peers[peer]!.holdings[sequence] = holdings.removing(chunk, chunkCount: downloads[sequence]!.chunkCount)
        }
    }

    /// Stops asking `peer` for anything: what it has in flight is cancelled and goes to others.
    private mutating func penalize(_ peer: Peer) {
        penalized.insert(peer)
        penalizedOrder.append(peer)
        if penalizedOrder.count > configuration.maxPenalizedPeers { penalized.remove(penalizedOrder.removeFirst()) }
        statistics.peersPenalized += 1
        var cancelled: [TransferCopy<Peer>] = []
        for (sequence, chunks) in peers[peer]!.requests {
            for chunk in chunks { cancelled.append(TransferCopy(peer: peer, sequence: sequence, chunk: chunk)) }
        }
        cancelRequests(cancelled)
        output.append(.penalize(peer, badChunks: peers[peer]!.badChunks))
    }
}
