import WeftModel

// Push (SPEC.md §14.8): new operations go at once to the peers that lack them, operations
// in full along eager links, announcements (IHAVE) along lazy ones. A peer that pushes an
// operation this node holds is sent PRUNE and becomes lazy; an announced operation that does
// not arrive in time is asked for with a grafting WANT, which makes the link eager again. The
// eager links thus settle into a spanning tree and each node receives each operation about once.

extension SyncCore {
    // MARK: - Operations stored

    mutating func stored(_ outcome: StoreOutcome) {
        var newlyPublished: Set<ConversationID> = []
        var storedPerLog: [ConversationID: Int] = [:]
        for signed in outcome.stored { storedPerLog[signed.operation.conversation, default: 0] += 1 }
        var released = 0
        for summary in outcome.summaries {
            let conversation = summary.conversation
            let previous = logs[conversation]
            if let previous, !previous.isPublished, summary.isPublished { newlyPublished.insert(conversation) }
            // Heads that moved further than the operations this commit stored passed over
            // operations held pending before: they are released (for the pending bound).
            var advance: UInt64 = 0
            for (author, sequence) in summary.heads.entries where sequence > previous?.heads[author] ?? 0 {
                advance += sequence - (previous?.heads[author] ?? 0)
            }
            released += max(0, Int(clamping: advance) - storedPerLog[conversation, default: 0])
            logs[conversation] = summary
            reconciliationSet.update(summary)
        }
        for id in outcome.refused { recent.remove(id) }
        if released > 0 { releasePending(released) }

        let source = outcome.source.flatMap { peers[$0] != nil ? $0 : nil }
        if let source {
            peers[source]?.pendingOperations += outcome.pending
            peers[source]?.pendingBytes += outcome.pendingByteCount
            statistics.duplicatesReceived += outcome.duplicates
        }

        let order = peerOrder
        for signed in outcome.stored {
            // Learned only once stored: an operation the store refused (a forged signature)
            // says nothing about what exists.
            if source != nil { learn(signed.operation.author, signed.operation.sequence, in: signed.operation.conversation) }
            recent.insert(signed.id)
            missing[signed.id] = nil
            if let source { outgoing[source, default: OutgoingBatch()].acknowledgements.append(signed.operation) }
            let conversation = signed.operation.conversation
            // Unpublished logs stay here; a log published by this commit goes whole, below.
            guard logs[conversation]?.isPublished ?? true, !newlyPublished.contains(conversation) else { continue }
            for peer in order where peer != source {
                guard let state = peers[peer], !state.holds(signed) else { continue }
                if state.isEager {
                    outgoing[peer, default: OutgoingBatch()].pushes.append(signed)
                } else {
                    outgoing[peer, default: OutgoingBatch()].announcements.append(SyncMessage.Announcement(signed))
                }
            }
        }

        for conversation in catchUpOrder(newlyPublished) {
            for peer in order {
                sendFromStore(conversation, to: peer, beyond: peers[peer]?.heads[conversation] ?? VersionVector())
            }
        }

        if let source, outcome.pending > 0 {
            scheduleCauseRequests(for: outcome.stored, missing: outcome.missingCauses, from: source)
        }
    }

    /// Credits released pending operations back to every peer's count (the store does not say
    /// whose they were), bytes in proportion.
    private mutating func releasePending(_ released: Int) {
        for peer in peerOrder {
            guard let state = peers[peer], state.pendingOperations > 0 else { continue }
            let remaining = max(0, state.pendingOperations - released)
            peers[peer]?.pendingBytes = state.pendingBytes / state.pendingOperations * remaining
            peers[peer]?.pendingOperations = remaining
        }
    }

    /// Schedules asking the peer whose operations came back pending for their missing causes.
    /// The request waits a graft timeout: causes are often on their way (along another link,
    /// or in the next message), and asking at once would bring them twice. Causes the store
    /// named are asked for by identifier, only those still missing then: asking for the whole
    /// log past this node's heads brought back everything in flight on a busy log (a mesh of
    /// 20 nodes received each operation twice over).
    private mutating func scheduleCauseRequests(
        for operations: [SignedOperation], missing: [ConversationID: [OperationID]], from peer: PeerID
    ) {
        let due = now + graftTimeout
        for conversation in Set(operations.map(\.operation.conversation)) {
            if peers[peer]?.causeRequests[conversation] == nil {
                peers[peer]?.causeRequests[conversation] = PeerState.CauseRequest(
                    due: due, heads: logs[conversation]?.heads ?? VersionVector())
            }
            if let causes = missing[conversation] { peers[peer]?.causeRequests[conversation]?.causes.formUnion(causes) }
        }
    }

    /// Sends the cause requests that are due: the named causes not received since, by
    /// identifier; for a log whose causes were not named, the log past this node's heads if
    /// it still holds operations past a gap in an author's chain, or made no progress since
    /// (operations waiting on another author).
    private mutating func requestOverdueCauses() {
        for peer in peerOrder {
            guard let requests = peers[peer]?.causeRequests, !requests.isEmpty else { continue }
            var entries: [SyncMessage.Want.Entry] = []
            for conversation in catchUpOrder(requests.keys) where requests[conversation]!.due <= now {
                let request = requests[conversation]!
                peers[peer]?.causeRequests[conversation] = nil
                guard let log = logs[conversation] else { continue }
                if !request.causes.isEmpty {
                    let stillMissing = request.causes.filter { !recent.contains($0) }.sorted()
                    if !stillMissing.isEmpty { entries.append(SyncMessage.Want.Entry(conversation: conversation, beyond: nil, ids: stillMissing)) }
                    continue
                }
                let contiguous = log.heads.entries.values.reduce(0, +)
                guard UInt64(log.operationCount) > contiguous || log.heads == request.heads else { continue }
                entries.append(SyncMessage.Want.Entry(conversation: conversation, beyond: log.heads))
            }
            statistics.causeRequests += entries.count
            sendWants(entries, isGraft: false, to: peer)
        }
    }

    // MARK: - Operations received

    mutating func receiveOperations(_ message: SyncMessage.Operations, from peer: PeerID) {
        guard let state = peers[peer] else { return }
        statistics.operationsReceived += message.operations.count
        let overBound = state.pendingOperations >= configuration.maxPendingOperationsPerPeer
            || state.pendingBytes >= configuration.maxPendingBytesPerPeer
        var fresh: [SignedOperation] = []
        var duplicates = 0
        var dropped = 0
        for signed in message.operations {
            let op = signed.operation
            peers[peer]?.record(signed)
            peers[peer]?.confirm(signed.id)
            let ownHead = logs[op.conversation]?.heads[op.author] ?? 0
            // A pushed operation in a slot held here is a duplicate. An asked-for one may be
            // the other half of a fork (§13.1), so only one seen lately counts.
            if recent.contains(signed.id) || (message.isPush && op.sequence <= ownHead) {
                if grafted[signed.id] != nil { statistics.duplicatesGrafted += 1 }
                if message.isPush, let announcedAt = grafted.removeValue(forKey: signed.id) { observeLateness(since: announcedAt) }
                duplicates += 1
                outgoing[peer, default: OutgoingBatch()].acknowledgements.append(signed.operation)
                continue
            }
            if overBound && op.sequence > ownHead + 1 {
                // Not verified, but the peer holds it and this node lacks it: counted as
                // unsynced until anti-entropy brings it.
                learn(op.author, op.sequence, in: op.conversation)
                dropped += 1
                continue
            }
            recent.insert(signed.id)
            if message.isPush, let entry = missing[signed.id] { observeLateness(since: entry.announcedAt) }
            missing[signed.id] = nil
            fresh.append(signed)
        }
        statistics.duplicatesReceived += duplicates
        if !message.isPush { statistics.duplicatesAnswered += duplicates }
        if duplicates > 0, message.isPush, peers[peer]?.isEager == true {
            peers[peer]?.isEager = false
            statistics.prunesSent += 1
            send(.prune, to: peer)
        }
        if !fresh.isEmpty { output.append(.apply(fresh, from: peer)) }
        if dropped > 0 {
            statistics.operationsDropped += dropped
            output.append(.dropped(peer, count: dropped, reason:
                "the peer's operations already hold \(state.pendingOperations) operations (\(state.pendingBytes) bytes) pending here, "
                + "the bound is \(configuration.maxPendingOperationsPerPeer) (\(configuration.maxPendingBytesPerPeer) bytes): "
                + "operations not next in their author's chain are refused"))
        }
    }

    /// Records that some peer holds `(author, sequence)` of a log: for `unsynced`.
    mutating func learn(_ author: UserID, _ sequence: UInt64, in conversation: ConversationID) {
        if bestKnownHeads[conversation]?[author] ?? 0 < sequence {
            bestKnownHeads[conversation, default: VersionVector()].set(author, sequence)
        }
    }

    // MARK: - Announcements

    mutating func receiveAnnouncements(_ announcements: [SyncMessage.Announcement], from peer: PeerID) {
        for announcement in announcements {
            peers[peer]?.known.insert(announcement.id)
            peers[peer]?.confirm(announcement.id)
            learn(announcement.author, announcement.sequence, in: announcement.conversation)
            let ownHead = logs[announcement.conversation]?.heads[announcement.author] ?? 0
            guard announcement.sequence > ownHead, !recent.contains(announcement.id) else { continue }
            if missing[announcement.id] != nil {
                missing[announcement.id]?.announcers.append(peer)
            } else if missing.count < configuration.maxMissingOperations {
                missing[announcement.id] = MissingOperation(
                    conversation: announcement.conversation, author: announcement.author, sequence: announcement.sequence,
                    announcers: [peer], deadline: now + graftTimeout, announcedAt: now)
            }
        }
    }

    // MARK: - Graft timeout

    /// How long an announced operation may take before it is grafted: the configured
    /// timeout, or twice how late eager pushes have lately arrived if more, up to the
    /// configured maximum. On a loaded node pushes wait in queues; a fixed timeout then
    /// grafts what is on its way, the push arrives as well, and the duplicates load the
    /// node further (a mesh of 20 nodes on two cores received each operation three times).
    var graftTimeout: UInt64 {
        min(configuration.maxGraftTimeoutMilliseconds, max(configuration.graftTimeoutMilliseconds, pushLateness * 2))
    }

    /// A push arrived `now`, first announced at `announcedAt`.
    mutating func observeLateness(since announcedAt: UInt64) {
        let observed = now >= announcedAt ? now - announcedAt : 0
        pushLateness = max(observed, pushLateness - pushLateness / 64)
    }

    // MARK: - Timer

    mutating func tick(_ nowMilliseconds: UInt64) {
        now = max(now, nowMilliseconds)
        requestOverdueAnnouncements()
        requestOverdueCauses()
        for peer in peerOrder {
            guard let state = peers[peer], now >= state.lastReconciliation + configuration.antiEntropyIntervalMilliseconds else { continue }
            startReconciliation(with: peer)
        }
    }

    /// Asks for announced operations that did not arrive by their deadline (GRAFT), each from
    /// its announcers in turn, three times at most; anti-entropy covers the rest.
    private mutating func requestOverdueAnnouncements() {
        let overdue = missing.filter { $0.value.deadline <= now }.keys.sorted()
        guard !overdue.isEmpty else { return }
        var requests: [PeerID: [ConversationID: [OperationID]]] = [:]
        for id in overdue {
            guard var entry = missing[id] else { continue }
            let held = logs[entry.conversation]?.heads[entry.author] ?? 0 >= entry.sequence || recent.contains(id)
            let announcers = entry.announcers.filter { peers[$0] != nil }
            guard !held, entry.requests < 3, !announcers.isEmpty else {
                missing[id] = nil
                continue
            }
            let announcer = announcers[entry.requests % announcers.count]
            requests[announcer, default: [:]][entry.conversation, default: []].append(id)
            entry.requests += 1
            entry.deadline = now + graftTimeout
            if grafted.count >= 4_096 { grafted.removeAll(keepingCapacity: true) }
            grafted[id] = entry.announcedAt
            missing[id] = entry
        }
        for peer in requests.keys.sorted() {
            let byConversation = requests[peer]!
            peers[peer]?.isEager = true
            statistics.grafts += byConversation.values.reduce(0) { $0 + $1.count }
            let entries = byConversation.keys.sorted().map {
                SyncMessage.Want.Entry(conversation: $0, beyond: nil, ids: byConversation[$0]!.sorted())
            }
            sendWants(entries, isGraft: true, to: peer)
        }
    }

    /// Sends WANT entries in messages that fit.
    mutating func sendWants(_ entries: [SyncMessage.Want.Entry], isGraft: Bool, to peer: PeerID) {
        for chunk in split(entries, byteCount: SyncMessage.byteCount(of:)) {
            send(.want(SyncMessage.Want(isGraft: isGraft, entries: chunk)), to: peer)
        }
    }
}
