import WeftModel

// Push (SPEC.md §14.8): new operations go at once to the peers that lack them, operations
// in full along eager links, announcements (IHAVE) along lazy ones. A peer that pushes an
// operation this node holds is sent PRUNE and becomes lazy; an announced operation that does
// not arrive in time is asked for with a grafting WANT, which makes the link eager again. The
// eager links thus settle into a spanning tree and each node receives each operation about once.

extension SyncCore {
    // MARK: - Operations stored

    mutating func stored(_ outcome: StoreOutcome) {
        removalRule.update(outcome.memberships)
        var newlyPublished: Set<ConversationID> = []
        var storedPerLog: [ConversationID: Int] = outcome.storedPerLog ?? [:]
        if outcome.storedPerLog == nil {
            for signed in outcome.stored { storedPerLog[signed.operation.conversation, default: 0] += 1 }
        }
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
        if !creationLogs.isEmpty {
            for id in outcome.stored.map(\.id) + outcome.refused + outcome.duplicateIDs {
                if let log = creationLogs.removeValue(forKey: id) { creationsInFlight[log] = nil }
            }
        }

        let source = outcome.source.flatMap { peers[$0] != nil ? $0 : nil }
        // Whose bound the commit counts against, even if its connection ended meanwhile.
        let sourceUser = outcome.source.flatMap { peers[$0]?.user ?? departed[$0] }
        if let user = sourceUser {
            if var unsettled = unsettledByUser[user] {
                for signed in outcome.stored { unsettled.remove(signed.id) }
                for id in outcome.refused { unsettled.remove(id) }
                for id in outcome.duplicateIDs { unsettled.remove(id) }
                unsettledByUser[user] = unsettled.isEmpty ? nil : unsettled
            }
            if outcome.pending > 0 {
                pendingByUser[user, default: PendingCount()].operations += outcome.pending
                pendingByUser[user, default: PendingCount()].bytes += outcome.pendingByteCount
            }
        }
        if source != nil { statistics.duplicatesReceived += outcome.duplicates }

        let order = peerOrder
        // Operations the removal rule may withhold from a peer go to it through a read, which
        // judges each on its causal past (the commit does not report pasts).
        var judged: [ConnectionNumber: [SignedOperation]] = [:]
        for signed in outcome.stored {
            // Learned only once stored: an operation the store refused (a forged signature)
            // says nothing about what exists.
            if source != nil { learn(signed.operation.author, signed.operation.sequence, in: signed.operation.conversation) }
            recent.insert(signed.id)
            forgetMissing(signed.id)
            if let source { outgoing[source, default: OutgoingBatch()].acknowledgements.append(signed.operation) }
            let conversation = signed.operation.conversation
            // Unpublished logs stay here; a log published by this commit goes whole, below.
            // Pending operations stay too: peers get them from the log once their causes are
            // here (reconciliation), not on the word of whoever sent them.
            guard logs[conversation]?.isPublished ?? true, !newlyPublished.contains(conversation),
                !outcome.pendingIDs.contains(signed.id)
            else { continue }
            for peer in order where peer != source {
                guard let state = peers[peer], !state.holds(signed) else { continue }
                if removalRule.concerns(state.user, in: conversation) {
                    judged[peer, default: []].append(signed)
                } else if state.isEager {
                    outgoing[peer, default: OutgoingBatch()].pushes.append(signed)
                } else {
                    outgoing[peer, default: OutgoingBatch()].announcements.append(SyncMessage.Announcement(signed))
                }
            }
        }

        for (peer, operations) in judged.sorted(by: { $0.key < $1.key }) {
            for signed in operations { peers[peer]?.record(signed) }
            for chunk in operations.map(\.id).chunked(Self.identifiersPerRead) { sendStoredOperations(chunk, to: peer) }
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

    /// Credits released pending operations back to every peer identity's count (the store
    /// does not say whose they were), bytes in proportion. An identity whose count reaches
    /// zero is forgotten.
    mutating func releasePending(_ released: Int) {
        for user in pendingByUser.keys.sorted() {
            guard let count = pendingByUser[user] else { continue }
            let remaining = max(0, count.operations - released)
            if remaining == 0 {
                pendingByUser[user] = nil
            } else {
                pendingByUser[user] = PendingCount(operations: remaining, bytes: count.bytes / count.operations * remaining)
            }
        }
    }

    /// Schedules asking the peer whose operations came back pending for their missing causes.
    /// The request waits a graft timeout: causes are often on their way (along another link,
    /// or in the next message), and asking at once would bring them twice. Causes the store
    /// named are asked for by identifier, only those still missing then: asking for the whole
    /// log past this node's heads brought back everything in flight on a busy log (a mesh of
    /// 20 nodes received each operation twice over).
    private mutating func scheduleCauseRequests(
        for operations: [SignedOperation], missing: [ConversationID: [OperationID]], from peer: ConnectionNumber
    ) {
        let due = now + graftTimeout
        for conversation in Set(operations.map(\.operation.conversation)).sorted() {
            guard var state = peers[peer] else { return }
            var request = state.causeRequests[conversation]
                ?? PeerState.CauseRequest(due: due, heads: logs[conversation]?.heads ?? VersionVector())
            // Bounded per log and per peer: past the bounds the log is asked for past this
            // node's heads as well, which names no identifier (a peer naming thousands of
            // made-up causes makes this node remember a few thousand at most).
            for cause in missing[conversation] ?? [] where !request.causes.contains(cause) {
                guard request.causes.count < configuration.maxCauseRequestsPerLog,
                    state.causeRequestCount < configuration.maxCauseRequestsPerPeer
                else {
                    request.askPastHeads = true
                    break
                }
                request.causes.insert(cause)
                state.causeRequestCount += 1
            }
            state.causeRequests[conversation] = request
            peers[peer] = state
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
            for conversation in catchUpOrder(requests.keys) {
                guard let request = requests[conversation], request.due <= now else { continue }
                peers[peer]?.causeRequests[conversation] = nil
                peers[peer]?.causeRequestCount -= request.causes.count
                guard let log = logs[conversation] else { continue }
                if !request.causes.isEmpty {
                    let stillMissing = request.causes.filter { !recent.contains($0) }.sorted()
                    let beyond = request.askPastHeads ? log.heads : nil
                    if !stillMissing.isEmpty || beyond != nil {
                        entries.append(SyncMessage.Want.Entry(conversation: conversation, beyond: beyond, ids: stillMissing))
                    }
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

    mutating func receiveOperations(_ message: SyncMessage.Operations, from peer: ConnectionNumber) {
        guard let state = peers[peer] else { return }
        statistics.operationsReceived += message.operations.count
        let pending = pendingByUser[state.user] ?? PendingCount()
        var unsettled = unsettledByUser[state.user] ?? []
        var overBound: Bool {
            pending.operations + unsettled.count >= configuration.maxPendingOperationsPerPeer
                || pending.bytes >= configuration.maxPendingBytesPerPeer
        }
        // The highest sequence of each author's chain in this message so far: an operation
        // that follows one before it continues a chain, as in an answer to WANT.
        var chains: [ConversationID: VersionVector] = [:]
        defer { unsettledByUser[state.user] = unsettled.isEmpty ? nil : unsettled }
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
            let chainHead = max(ownHead, chains[op.conversation]?[op.author] ?? 0)
            let ahead = op.sequence > chainHead + 1
            // An operation of a log neither held here nor created by an operation on its way to
            // the store can only wait for its causes, unless it is the creation (no causes): it
            // counts and is refused like one ahead of its chain (else a first operation in
            // made-up logs would pass any bound).
            let isCreation = op.causes.isEmpty
            let unrooted = !isCreation && logs[op.conversation] == nil && chains[op.conversation] == nil
                && creationsInFlight[op.conversation] == nil
            if ahead || unrooted {
                if overBound {
                    // Not verified, but the peer holds it and this node lacks it: counted as
                    // unsynced until anti-entropy brings it.
                    learn(op.author, op.sequence, in: op.conversation)
                    dropped += 1
                    continue
                }
                unsettled.insert(signed.id)
            }
            if op.sequence > chains[op.conversation]?[op.author] ?? 0 { chains[op.conversation, default: VersionVector()].set(op.author, op.sequence) }
            if isCreation, logs[op.conversation] == nil, creationsInFlight.count < Self.maxCreationsInFlight,
                creationsInFlight[op.conversation] == nil
            {
                creationsInFlight[op.conversation] = signed.id
                creationLogs[signed.id] = op.conversation
            }
            recent.insert(signed.id)
            if message.isPush, let entry = missing[signed.id] { observeLateness(since: entry.announcedAt) }
            forgetMissing(signed.id)
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
                "the peer's operations already hold \(pending.operations) operations (\(pending.bytes) bytes) pending here, "
                + "the bound is \(configuration.maxPendingOperationsPerPeer) (\(configuration.maxPendingBytesPerPeer) bytes): "
                + "operations not next in their author's chain are refused"))
        }
    }

    /// Records that some peer holds `(author, sequence)` of a log: for `unsynced`.
    /// Logs not held here are remembered up to `maxUnheldLogsKnown` more than those held: a
    /// member naming made-up logs would otherwise grow this without end.
    mutating func learn(_ author: UserID, _ sequence: UInt64, in conversation: ConversationID) {
        guard logs[conversation] != nil || bestKnownHeads[conversation] != nil
            || bestKnownHeads.count < logs.count + configuration.maxUnheldLogsKnown
        else { return }
        if bestKnownHeads[conversation]?[author] ?? 0 < sequence {
            bestKnownHeads[conversation, default: VersionVector()].set(author, sequence)
        }
    }

    // MARK: - Announcements

    mutating func receiveAnnouncements(_ announcements: [SyncMessage.Announcement], from peer: ConnectionNumber) {
        for announcement in announcements {
            peers[peer]?.known.insert(announcement.id)
            peers[peer]?.confirm(announcement.id)
            learn(announcement.author, announcement.sequence, in: announcement.conversation)
            let ownHead = logs[announcement.conversation]?.heads[announcement.author] ?? 0
            guard announcement.sequence > ownHead, !recent.contains(announcement.id) else { continue }
            if let entry = missing[announcement.id] {
                // A few announcers are enough to ask in turn; a peer repeating itself adds none.
                if entry.announcers.count < 8, !entry.announcers.contains(peer) { missing[announcement.id]?.announcers.append(peer) }
            } else if let user = peers[peer]?.user,
                missing.count < configuration.maxMissingOperations,
                missingByUser[user, default: 0] < configuration.maxMissingOperationsPerPeer,
                missingByLog[announcement.conversation, default: 0] < configuration.maxMissingOperationsPerLog
            {
                missing[announcement.id] = MissingOperation(
                    conversation: announcement.conversation, author: announcement.author, sequence: announcement.sequence,
                    announcers: [peer], firstAnnouncer: user, deadline: now + graftTimeout, announcedAt: now)
                missingByUser[user, default: 0] += 1
                missingByLog[announcement.conversation, default: 0] += 1
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
        var requests: [ConnectionNumber: [ConversationID: [OperationID]]] = [:]
        for id in overdue {
            guard var entry = missing[id] else { continue }
            let held = logs[entry.conversation]?.heads[entry.author] ?? 0 >= entry.sequence || recent.contains(id)
            let announcers = entry.announcers.filter { peers[$0] != nil }
            guard !held, entry.requests < 3, !announcers.isEmpty else {
                forgetMissing(id)
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
        for (peer, byConversation) in requests.sorted(by: { $0.key < $1.key }) {
            peers[peer]?.isEager = true
            statistics.grafts += byConversation.values.reduce(0) { $0 + $1.count }
            let entries = byConversation.sorted(by: { $0.key < $1.key }).map {
                SyncMessage.Want.Entry(conversation: $0.key, beyond: nil, ids: $0.value.sorted())
            }
            sendWants(entries, isGraft: true, to: peer)
        }
    }

    /// Forgets an announced operation: it arrived, or is no longer asked for.
    mutating func forgetMissing(_ id: OperationID) {
        guard let entry = missing.removeValue(forKey: id) else { return }
        missingByUser[entry.firstAnnouncer, default: 1] -= 1
        if missingByUser[entry.firstAnnouncer] == 0 { missingByUser[entry.firstAnnouncer] = nil }
        missingByLog[entry.conversation, default: 1] -= 1
        if missingByLog[entry.conversation] == 0 { missingByLog[entry.conversation] = nil }
    }

    /// Sends WANT entries in messages that fit, however many identifiers an entry holds.
    mutating func sendWants(_ entries: [SyncMessage.Want.Entry], isGraft: Bool, to peer: ConnectionNumber) {
        for want in SyncMessage.Want.messages(entries, isGraft: isGraft, softLimit: configuration.messageBodySoftLimit) {
            send(.want(want), to: peer)
        }
    }
}
