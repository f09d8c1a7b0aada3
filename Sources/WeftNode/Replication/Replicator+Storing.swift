import WeftModel
import WeftStore
import WeftSync

/// Operations peers acknowledged (by slot, STORED), waiting to be marked sent in one transaction.
struct Acknowledgements: ~Copyable {
    var ranges: [SlotRange] = []
    var waiting: CheckedContinuation<Void, Never>?
    var closed = false

    mutating func add(_ more: [SlotRange]) {
        guard !closed else { return }
        ranges += more
        waiting?.resume()
        waiting = nil
    }

    mutating func close() {
        closed = true
        waiting?.resume()
        waiting = nil
    }
}

extension Replicator {
    /// The storer: every flush interval, stores what arrived meanwhile in one commit (with the
    /// local user's delivered receipts, one per conversation), then reports it to the core per
    /// source peer.
    ///
    /// Two stages: while one batch is written (on the store's writer, one core), the next one's
    /// signatures are checked (Ed25519, the costliest step, over the cores), so a node catching
    /// up keeps both busy. The checker runs at most one batch ahead of the writer.
    func storeReceived() async {
        var next: CheckedItems?
        while !Task.isCancelled {
            let writing = next
            // Two child tasks at most, both awaited before the next round: the checker is
            // never more than one batch ahead, and nothing outlives the storer.
            next = await withTaskGroup(of: CheckedItems?.self) { group in
                if let writing { group.addTask { await self.store(writing); return nil } }
                group.addTask { await self.takeAndCheck() }
                var checked: CheckedItems?
                for await result in group where result != nil { checked = result }
                return checked
            }
            if next == nil, unstored.isClosed { return }
        }
    }

    /// Received operations taken for one commit, with their signatures checked (or why the
    /// check could not run: the store could not load its replica; the commit then fails).
    struct CheckedItems: Sendable {
        var items: [UnstoredOperations.Item]
        var batch: Result<Store.CheckedBatch, any Error>
    }

    /// Waits for received operations and a flush interval, takes them and checks them.
    private func takeAndCheck() async -> CheckedItems? {
        await unstored.waitForOperations()
        if unstored.isClosed { return nil }
        try? await Task.sleep(for: configuration.flushInterval)
        let items = unstored.take(configuration.maxFlushOperations)
        guard !items.isEmpty else { return nil }
        let operations = items.map(\.operation)
        inFlight.withLock { inFlight in for signed in operations { inFlight.insert(signed.id) } }
        let batch: Result<Store.CheckedBatch, any Error>
        do {
            batch = .success(try await localAuthor.store.checkSignatures(operations))
        } catch {
            batch = .failure(error)
        }
        return CheckedItems(items: items, batch: batch)
    }

    /// Stores one checked batch and reports the outcome to the core.
    private func store(_ checked: CheckedItems) async {
        let items = checked.items
        let operations = items.map(\.operation)
        do {
            // The storer reads no change set: the store may skip reading back updated messages.
            let applied = try await localAuthor.receive(checked.batch.get(), completeChanges: false)
            let new = Set(applied.newOperations)
            // Only commits of new operations appear on the change stream.
            inFlight.withLock { inFlight in for signed in operations where !new.contains(signed.id) { inFlight.remove(signed.id) } }
            for outcome in outcomes(of: items, applied: applied) { await feed(.stored(outcome)) }
            if !applied.droppedPending.isEmpty { await feed(.pendingDropped(applied.droppedPending)) }
            await pushReleased(applied, new: new)
        } catch {
            if error is CancellationError {
                // The node is stopping; peers offer them again next time.
                logger.debug("stopped before storing \(operations.count) received operation(s)")
            } else {
                logger.error("cannot store \(operations.count) received operation(s): \(error)")
            }
            inFlight.withLock { inFlight in for signed in operations { inFlight.remove(signed.id) } }
            // The core forgets it saw them, so they are taken again when offered again.
            var bySource: [ConnectionNumber: [OperationID]] = [:]
            for item in items { bySource[item.source, default: []].append(item.operation.id) }
            for (source, ids) in bySource.sorted(by: { $0.key < $1.key }) {
                await feed(.stored(StoreOutcome(summaries: [], stored: [], refused: ids, source: source)))
            }
        }
        unstored.stored()
    }

    /// Pushes the operations this commit released from pending (accepted now, stored before):
    /// pending operations are not pushed when they arrive (§14.8), so this is when peers get
    /// them, as if they had arrived now.
    private func pushReleased(_ applied: Store.Applied, new: Set<OperationID>) async {
        let released = applied.report.accepted.filter { !new.contains($0) }
        guard !released.isEmpty else { return }
        do {
            let operations = try await store.fetchOperations(ids: released)
            if !operations.isEmpty { await feed(.stored(StoreOutcome(summaries: [], stored: operations))) }
        } catch {
            logger.error("cannot read \(released.count) operation(s) released from pending to push them: \(error)")
        }
    }

    /// One outcome per source peer (what it sent that was new, duplicate, pending, refused),
    /// then one for what the commit stored of the local user's (its delivered receipts).
    func outcomes(of items: [UnstoredOperations.Item], applied: Store.Applied) -> [StoreOutcome] {
        let pending = Set(applied.report.pending)
        let refused = Set(applied.refused.map(\.operation))
        let pushable = Dictionary(applied.storedOperations.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var outcomes: [ConnectionNumber: StoreOutcome] = [:]
        var order: [ConnectionNumber] = []
        var taken: Set<OperationID> = []
        for item in items {
            let id = item.operation.id
            if outcomes[item.source] == nil {
                outcomes[item.source] = StoreOutcome(summaries: [], stored: [], source: item.source)
                order.append(item.source)
            }
            if refused.contains(id) {
                outcomes[item.source]?.refused.append(id)
            } else if let signed = pushable[id], taken.insert(id).inserted {
                outcomes[item.source]?.stored.append(signed)
            } else if !applied.newOperations.contains(id) || !taken.insert(id).inserted {
                outcomes[item.source]?.duplicates += 1
                outcomes[item.source]?.duplicateIDs.append(id)
            }
            if pending.contains(id) {
                outcomes[item.source]?.pending += 1
                outcomes[item.source]?.pendingIDs.insert(id)
                outcomes[item.source]?.pendingByteCount += SyncMessage.byteCount(of: item.operation)
                if let causes = applied.report.missingCauses[id] {
                    outcomes[item.source]?.missingCauses[item.operation.operation.conversation, default: []] += causes
                }
            }
        }
        var result = order.compactMap { outcomes[$0] }
        if !result.isEmpty {
            result[0].summaries = applied.summaries
            result[0].memberships = applied.memberships
            // The summaries' heads moved by everything the commit stored, whoever sent it.
            var perLog: [ConversationID: Int] = [:]
            for signed in applied.storedOperations { perLog[signed.operation.conversation, default: 0] += 1 }
            result[0].storedPerLog = perLog
        }
        let local = applied.storedOperations.filter { !taken.contains($0.id) }
        if !local.isEmpty { result.append(StoreOutcome(summaries: [], stored: local)) }
        return result
    }

    /// Marks acknowledged messages sent, in one transaction for all that arrived meanwhile.
    func markAcknowledged() async {
        while !Task.isCancelled {
            await withCheckedContinuation { continuation in
                let ready = acknowledgements.withLock { state in
                    if !state.ranges.isEmpty || state.closed { return true }
                    state.waiting = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
            let ranges = acknowledgements.withLock { state in
                defer { state.ranges = [] }
                return state.ranges
            }
            guard !ranges.isEmpty else {
                if acknowledgements.withLock({ $0.closed }) { return }
                continue
            }
            do {
                try await store.markSent(acknowledged: ranges)
            } catch {
                logger.error("cannot mark the operations of \(ranges.count) acknowledged slot range(s) sent: \(error)")
            }
        }
    }
}
