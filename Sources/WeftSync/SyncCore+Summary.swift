import WeftModel

// The reconciliation seam (SPEC.md §14.4, §14.5). `startReconciliation(with:)` and
// `handleReconciliationMessage(_:from:)` are the only places that know how two nodes find the
// logs they differ on; both hand their result to `requestDiffering(_:from:)`, which asks for
// them with WANT. Today the exchange is SUMMARY (every published log's digest, one entry
// each); range-based reconciliation (HAVE, §14.3) replaces it behind these two methods and
// keeps SUMMARY for small stores.

extension SyncCore {
    /// Starts a reconciliation round with the peer: on connect, and every anti-entropy interval.
    mutating func startReconciliation(with peer: PeerID) {
        guard peers[peer] != nil else { return }
        peers[peer]?.lastReconciliation = now
        statistics.reconciliations += 1
        let entries = logs.values.filter(\.isPublished).sorted { $0.conversation < $1.conversation }.map {
            SyncMessage.Summary.Entry(conversation: $0.conversation, digest: $0.digest, lastActivity: $0.lastActivity)
        }
        let perMessage = min(SyncMessage.maxListCount, max(1, configuration.messageBodySoftLimit / SyncMessage.summaryEntryByteCount))
        let parts = entries.isEmpty ? [[]] : entries.chunked(perMessage)
        for (index, part) in parts.enumerated() {
            send(.summary(SyncMessage.Summary(isFinal: index == parts.count - 1, entries: part)), to: peer)
        }
    }

    /// A reconciliation message from the peer.
    mutating func handleReconciliationMessage(_ message: SyncMessage, from peer: PeerID) {
        switch message {
        case .summary(let part):
            guard let state = peers[peer] else { return }
            guard state.incomingSummary.count + part.entries.count <= configuration.maxSummaryEntries else {
                output.append(.close(peer, reason: "a SUMMARY of more than \(configuration.maxSummaryEntries) logs"))
                peers[peer]?.incomingSummary = []
                return
            }
            peers[peer]?.incomingSummary += part.entries
            guard part.isFinal else { return }
            let entries = state.incomingSummary + part.entries
            peers[peer]?.incomingSummary = []
            var digests: [ConversationID: SetDigest] = [:]
            var differing: [ConversationID: HLCTimestamp] = [:]
            for entry in entries {
                digests[entry.conversation] = entry.digest
                let own = logs[entry.conversation]
                guard own?.digest != entry.digest else { continue }
                differing[entry.conversation] = max(entry.lastActivity, own?.lastActivity ?? HLCTimestamp(rawValue: 0))
            }
            peers[peer]?.summaryDigests = digests
            requestDiffering(differing, from: peer)
        case .have:
            // Range-based reconciliation (§14.3) is not in this version of the core: a HAVE is
            // ignored, and the peer falls back on SUMMARY.
            break
        case .want, .operations, .stored, .ihave, .prune:
            preconditionFailure("\(message.type) is not a reconciliation message")
        }
    }

    /// Asks the peer for what it may hold of these logs (valued by their latest activity, on
    /// either side), most recently active first: past this node's heads, or the whole log
    /// when the last round found equal heads and the digests still differ (a fork, or
    /// operations pending past a gap on both sides).
    mutating func requestDiffering(_ differing: [ConversationID: HLCTimestamp], from peer: PeerID) {
        guard let state = peers[peer] else { return }
        let order = differing.keys.sorted { a, b in
            differing[a]! != differing[b]! ? differing[a]! > differing[b]! : a < b
        }
        var entries: [SyncMessage.Want.Entry] = []
        entries.reserveCapacity(order.count)
        for conversation in order {
            var beyond = logs[conversation]?.heads ?? VersionVector()
            if let own = logs[conversation], let theirs = state.summaryDigests[conversation] {
                let pair = PeerState.DigestPair(ours: own.digest, theirs: theirs)
                if state.suspectedForks[conversation] == pair, state.wholeLogRequests[conversation] != pair {
                    beyond = VersionVector()
                    peers[peer]?.wholeLogRequests[conversation] = pair
                }
            }
            peers[peer]?.suspectedForks[conversation] = nil
            entries.append(SyncMessage.Want.Entry(conversation: conversation, beyond: beyond))
        }
        sendWants(entries, isGraft: false, to: peer)
    }
}
