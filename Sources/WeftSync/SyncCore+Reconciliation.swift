import WeftModel

// Reconciliation (SPEC.md §14.3, §14.10): how two nodes find the logs they hold differently.
// On connect and every anti-entropy interval one side sends `Reconciler.initiate()`; each HAVE
// is answered from the current `reconciliationSet`, and the differing conversations every round
// settles are gathered per peer until a round ends the reconciliation. They are then asked for
// with WANT carrying this node's heads (`requestDiffering`), as for any other request.
// SUMMARY (§14.4) is not sent; one received is answered the same way.

extension SyncCore {
    /// Begins an anti-entropy interval with the peer (on connect, then every interval): asks
    /// for whatever an unfinished reconciliation found, renews the peer's round budget, and
    /// starts a reconciliation if this node is the one that starts them.
    mutating func startReconciliation(with peer: ConnectionNumber) {
        guard let state = peers[peer] else { return }
        requestFound(from: peer)
        peers[peer]?.lastReconciliation = now
        peers[peer]?.reconciliation.roundsLeft = configuration.maxReconciliationRoundsPerInterval
        guard startsReconciliation(with: state.user) else { return }
        statistics.reconciliations += 1
        send(.have(Reconciler(set: reconciliationSet).initiate()), to: peer)
    }

    /// One reconciliation per pair is enough (both sides learn the same differing logs from
    /// it), and two running at once would ask for the same logs twice: the node with the
    /// lower user identifier starts them. Two nodes of one user both start (each answers).
    func startsReconciliation(with user: UserID) -> Bool { !(user < localUser) }

    /// One round of reconciliation from the peer: answers it, and gathers what it settled.
    mutating func receiveHave(_ have: HaveMessage, from peer: ConnectionNumber) {
        guard let state = peers[peer] else { return }
        guard state.reconciliation.roundsLeft > 0 else {
            statistics.reconciliationRoundsIgnored += 1
            return
        }
        peers[peer]?.reconciliation.roundsLeft -= 1
        let reply: HaveMessage?
        let differing: [ConversationID]
        do {
            (reply, differing) = try Reconciler(set: reconciliationSet).respond(to: have)
        } catch {
            output.append(.close(peer, reason: "cannot answer its HAVE: \(error)"))
            return
        }
        peers[peer]?.reconciliation.found.formUnion(differing)
        if let reply { send(.have(reply), to: peer) }
        // Over when this HAVE needs no answer, or the answer needs none: both sides then know
        // the same differing logs. Out of rounds, or with many found, ask for them now.
        let isOver = !(reply?.expectsReply ?? false)
        guard let progress = peers[peer]?.reconciliation else { return }
        if isOver || progress.roundsLeft == 0 || progress.found.count >= configuration.maxDifferingPerRequest {
            requestFound(from: peer)
        }
    }

    /// A SUMMARY from the peer (§14.4): the logs whose digests differ from ours are asked for
    /// once its final part arrives.
    mutating func receiveSummary(_ part: SyncMessage.Summary, from peer: ConnectionNumber) {
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
        var differing: [ConversationID: HLCTimestamp] = [:]
        for entry in entries where logs[entry.conversation]?.digest != entry.digest {
            differing[entry.conversation] = max(entry.lastActivity, logs[entry.conversation]?.lastActivity ?? HLCTimestamp(rawValue: 0))
        }
        requestDiffering(differing, from: peer)
    }

    /// Asks the peer for the differing logs the reconciliation with it has found so far.
    private mutating func requestFound(from peer: ConnectionNumber) {
        guard let found = peers[peer]?.reconciliation.found, !found.isEmpty else { return }
        peers[peer]?.reconciliation.found = []
        // HAVE carries no activity: this node's own, where it holds the log.
        var differing: [ConversationID: HLCTimestamp] = [:]
        for conversation in found { differing[conversation] = logs[conversation]?.lastActivity ?? HLCTimestamp(rawValue: 0) }
        requestDiffering(differing, from: peer)
    }

    /// Asks the peer for what it may hold of these logs (valued by their latest known activity),
    /// most recently active first (the peer answers in its own order of activity, §14.10): past this
    /// node's heads, or the whole log when the peer last asked for it with heads equal to ours
    /// and our digest has not changed since (a fork, or operations pending past a gap on both
    /// sides).
    mutating func requestDiffering(_ differing: [ConversationID: HLCTimestamp], from peer: ConnectionNumber) {
        guard let state = peers[peer] else { return }
        let order = differing.sorted { a, b in a.value != b.value ? a.value > b.value : a.key < b.key }.map(\.key)
        var entries: [SyncMessage.Want.Entry] = []
        entries.reserveCapacity(order.count)
        for conversation in order {
            var beyond = logs[conversation]?.heads ?? VersionVector()
            if let own = logs[conversation], state.suspectedForks[conversation] == own.digest,
                state.wholeLogRequests[conversation] != own.digest
            {
                beyond = VersionVector()
                peers[peer]?.wholeLogRequests[conversation] = own.digest
            }
            peers[peer]?.suspectedForks[conversation] = nil
            entries.append(SyncMessage.Want.Entry(conversation: conversation, beyond: beyond))
        }
        statistics.reconciliationRequests += entries.count
        sendWants(entries, isGraft: false, to: peer)
    }
}
