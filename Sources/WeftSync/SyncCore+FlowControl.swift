import WeftModel

// Flow control (SPEC.md §14.10): a peer whose channel is not writable gets its messages
// queued, up to `maxQueuedBytesPerPeer`; past that it is *behind*: its pushes are not queued
// but remembered by conversation, and sent from the store once it is writable again.

extension SyncCore {
    /// Sends `message` to `peer`, or queues it while the peer is not writable. Returns false if
    /// the queue had no room (then nothing was sent, and the caller must not record it).
    @discardableResult
    mutating func send(_ message: SyncMessage, to peer: ConnectionNumber) -> Bool {
        guard let state = peers[peer] else { return false }
        if state.isWritable && state.queue.isEmpty {
            output.append(.send(peer, message))
            return true
        }
        let byteCount = message.encodedByteCount
        guard state.queuedBytes + byteCount <= configuration.maxQueuedBytesPerPeer else {
            statistics.messagesNotQueued += 1
            return false
        }
        peers[peer]?.queue.append(message)
        peers[peer]?.queuedBytes += byteCount
        return true
    }

    /// Sends the peer the log's operations past `beyond` from the store, now if it is
    /// writable and not behind, else once it is (then past its known heads at that time).
    mutating func sendFromStore(_ conversation: ConversationID, to peer: ConnectionNumber, beyond: VersionVector) {
        guard let state = peers[peer] else { return }
        guard state.isWritable, !state.isBehind, state.storeReads < configuration.maxStoreReadsPerPeer else {
            peers[peer]?.record(beyond, in: conversation)
            peers[peer]?.behind.insert(conversation)
            return
        }
        let inFlight = state.recentPushes.pushed(since: now >= graftTimeout ? now - graftTimeout : 0)
        output.append(
            .sendStored(
                peer, conversation, beyond: beyond, skipping: HeldOperations(state.confirmed, inFlight: inFlight),
                withholding: removalRule.restricted(to: state.user)))
        peers[peer]?.storeReads += 1
        statistics.logsSentFromStore += 1
        // Counted as held from now on: if the operations are lost, anti-entropy finds out.
        peers[peer]?.record(beyond, in: conversation)
        if let own = logs[conversation]?.heads { peers[peer]?.record(own, in: conversation) }
    }

    /// Sends the peer operations it asked for by identifier: now if it is writable and has a
    /// read to spare, else once it has (at most `maxDeferredIDsPerPeer` wait; past that they
    /// are dropped, and the peer asks again or anti-entropy finds them).
    mutating func sendStoredOperations(_ ids: [OperationID], to peer: ConnectionNumber) {
        guard let state = peers[peer], !ids.isEmpty else { return }
        guard state.isWritable, state.deferredIDs.isEmpty, state.storeReads < configuration.maxStoreReadsPerPeer else {
            let room = max(0, configuration.maxDeferredIDsPerPeer - state.deferredIDs.count)
            peers[peer]?.deferredIDs += ids.prefix(room)
            statistics.requestsDropped += max(0, ids.count - room)
            return
        }
        output.append(.sendStoredOperations(peer, ids, withholding: removalRule.restricted(to: state.user)))
        peers[peer]?.storeReads += 1
    }

    mutating func setWritable(_ peer: ConnectionNumber, _ isWritable: Bool) {
        guard peers[peer] != nil else { return }
        peers[peer]?.isWritable = isWritable
        guard isWritable, let state = peers[peer] else { return }
        for message in state.queue { output.append(.send(peer, message)) }
        peers[peer]?.queue = []
        peers[peer]?.queuedBytes = 0
        resumeReads(for: peer)
    }

    /// A read from the store for the peer finished: the next waiting one may start.
    mutating func storeReadDone(_ peer: ConnectionNumber) {
        guard let state = peers[peer] else { return }
        peers[peer]?.storeReads = max(0, state.storeReads - 1)
        if state.isWritable { resumeReads(for: peer) }
    }

    /// Starts the reads the peer's requests wait for, as many as it may have under way: the
    /// logs it fell behind on, most recently active first, then operations by identifier.
    private mutating func resumeReads(for peer: ConnectionNumber) {
        guard let state = peers[peer], state.hasDeferredReads else { return }
        peers[peer]?.behind = []
        for conversation in catchUpOrder(state.behind) {
            sendFromStore(conversation, to: peer, beyond: peers[peer]?.heads[conversation] ?? VersionVector())
        }
        guard let after = peers[peer], !after.deferredIDs.isEmpty, after.isWritable,
            after.storeReads < configuration.maxStoreReadsPerPeer
        else { return }
        var rest = after.deferredIDs[...]
        var reads = after.storeReads
        while !rest.isEmpty, reads < configuration.maxStoreReadsPerPeer {
            let chunk = Array(rest.prefix(Self.identifiersPerRead))
            rest = rest.dropFirst(chunk.count)
            output.append(.sendStoredOperations(peer, chunk, withholding: removalRule.restricted(to: after.user)))
            reads += 1
        }
        peers[peer]?.storeReads = reads
        peers[peer]?.deferredIDs = Array(rest)
    }

    /// Operations read from the store for a peer by identifier in one read, at most.
    static let identifiersPerRead = 4_096

    /// Conversations most recently active first (catch-up order, §14.10), then by identifier.
    func catchUpOrder(_ conversations: some Collection<ConversationID>) -> [ConversationID] {
        conversations.sorted { a, b in
            let (ta, tb) = (logs[a]?.lastActivity.rawValue ?? 0, logs[b]?.lastActivity.rawValue ?? 0)
            return ta != tb ? ta > tb : a < b
        }
    }

    /// Sends each peer the pushes, announcements and acknowledgements the event gathered,
    /// split into messages that fit.
    mutating func flushOutgoing() {
        guard !outgoing.isEmpty else { return }
        let batches = outgoing
        outgoing = [:]
        for peer in batches.keys.sorted() {
            guard let batch = batches[peer], peers[peer] != nil else { continue }
            for chunk in split(batch.pushes, byteCount: SyncMessage.byteCount(of:)) {
                pushOperations(chunk, to: peer)
            }
            let announcementsPerMessage = max(1, configuration.messageBodySoftLimit / SyncMessage.announcementByteCount)
            for chunk in batch.announcements.chunked(min(announcementsPerMessage, SyncMessage.maxListCount)) {
                if send(.ihave(chunk), to: peer) { statistics.operationsAnnounced += chunk.count }
            }
            let rangesPerMessage = max(1, configuration.messageBodySoftLimit / SyncMessage.slotRangeByteCount)
            for chunk in SlotRange.covering(batch.acknowledgements).chunked(min(rangesPerMessage, SyncMessage.maxListCount)) {
                send(.stored(chunk), to: peer)
            }
        }
    }

    private mutating func pushOperations(_ operations: [SignedOperation], to peer: ConnectionNumber) {
        guard let state = peers[peer] else { return }
        if !state.isBehind, send(.operations(SyncMessage.Operations(isPush: true, operations: operations)), to: peer) {
            for operation in operations {
                peers[peer]?.record(operation)
                peers[peer]?.recentPushes.insert(operation.id, at: now, maxAge: configuration.maxGraftTimeoutMilliseconds)
            }
            statistics.operationsPushed += operations.count
        } else {
            // Behind: these go from the store once the peer is writable again.
            for operation in operations { peers[peer]?.behind.insert(operation.operation.conversation) }
        }
    }

    /// Splits items into runs whose bytes stay under the soft limit (a run holds at least one
    /// item) and whose count fits a list.
    func split<T>(_ items: [T], byteCount: (T) -> Int) -> [[T]] {
        var runs: [[T]] = []
        var run: [T] = []
        var runBytes = 0
        for item in items {
            let bytes = byteCount(item)
            if !run.isEmpty, runBytes + bytes > configuration.messageBodySoftLimit || run.count == SyncMessage.maxListCount {
                runs.append(run)
                run = []
                runBytes = 0
            }
            run.append(item)
            runBytes += bytes
        }
        if !run.isEmpty { runs.append(run) }
        return runs
    }
}

extension Array {
    /// Consecutive slices of at most `size` elements.
    func chunked(_ size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}
