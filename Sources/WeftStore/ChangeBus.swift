import Synchronization
import WeftModel

/// The change bus: the subscribers of one store (`Store.changes(includingMessages:)`) and the
/// count of published batches. Owns the subscribers' streams and the batch numbers; it never
/// touches the database. Publishing happens on GRDB's writer queue right after each commit
/// (`Transactions.committed(_:)`), so batches go out in commit order.
final class ChangeBus: Sendable {
    private struct State {
        var nextID = 0
        var continuations: [Int: AsyncStream<CommittedChanges>.Continuation] = [:]
        /// The subscribers that include messages (`Store.changes(includingMessages:)`).
        var includingMessages: Set<Int> = []
        var published: UInt64 = 0
    }

    private let state = Mutex(State())

    var latestNumber: UInt64 { state.withLock { $0.published } }

    /// How many streams are subscribed.
    var count: Int { state.withLock { $0.continuations.count } }

    /// Whether some subscriber reads messages: a commit reads back the messages it only
    /// updates for them, and skips that while none does.
    var wantMessages: Bool { state.withLock { !$0.includingMessages.isEmpty } }

    func subscribe(limit: Int, includingMessages: Bool = true) -> ChangeStream {
        let (stream, continuation) = AsyncStream.makeStream(of: CommittedChanges.self, bufferingPolicy: .bufferingNewest(limit))
        let first = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.continuations[id] = continuation
            if includingMessages { state.includingMessages.insert(id) }
            continuation.onTermination = { [weak self] _ in self?.remove(id) }
            return state.published + 1
        }
        return ChangeStream(base: stream, firstNumber: first)
    }

    func publish(_ publication: Publication) {
        guard !publication.isEmpty else { return }
        state.withLock { state in
            state.published += 1
            let batch = CommittedChanges(
                number: state.published, changes: publication.changes, outbox: publication.outbox,
                waitingMessages: publication.waitingMessages, summaries: publication.stored.summaries,
                storedOperations: publication.stored.storedOperations, memberships: publication.stored.memberships)
            // Never blocks: a full buffer drops its oldest batch. A batch built without the
            // messages skips the subscribers that want them (they joined during its commit):
            // the gap in the numbers tells them.
            for (id, continuation) in state.continuations
            where publication.includesMessages || !state.includingMessages.contains(id) {
                continuation.yield(batch)
            }
        }
    }

    /// Ends every stream (the store is gone). Finishing runs `onTermination`, which takes the
    /// lock: so outside it.
    func finishAll() {
        let all = state.withLock { state in
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in all { continuation.finish() }
    }

    private func remove(_ id: Int) {
        state.withLock { state in
            state.continuations[id] = nil
            state.includingMessages.remove(id)
        }
    }
}

/// What a committed transaction tells subscribers (`ChangeBus.publish(_:)`).
struct Publication: Sendable {
    var changes = ChangeSet()
    var outbox: [OutboxChange] = []
    var waitingMessages: Set<OperationID> = []
    /// What the commit stored, for replication (summaries, operations to push).
    var stored = StoredRecord()
    /// False when the commit did not read back the messages it only updated (no subscriber
    /// wanted them): subscribers that want messages do not get it.
    var includesMessages = true

    var isEmpty: Bool { changes.isEmpty && outbox.isEmpty && stored.summaries.isEmpty && stored.storedOperations.isEmpty }
}
