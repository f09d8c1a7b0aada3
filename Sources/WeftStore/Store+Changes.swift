import Synchronization
import WeftModel

/// What one committed transaction changed, as `Store.changes()` delivers it: whoever wrote
/// (local writes, operations received from peers, the outbox).
public struct CommittedChanges: Sendable, Equatable {
    /// Counts the store's commits that changed something, from 1 each time the store is
    /// opened; consecutive, so a gap means batches were missed (see `missedBatches`).
    public var number: UInt64
    /// Conversations and messages created, updated (with the property, old and new value) or
    /// deleted.
    public var changes: ChangeSet
    /// Outbox entries added or changed (state or attempts).
    public var outbox: [OutboxChange]
    /// The local user's messages among `changes` that wait in the outbox after this commit:
    /// not yet handed to the mesh.
    public var waitingMessages: Set<OperationID>
    /// The new summary of each log the commit stored operations in or published (sorted by
    /// conversation); unpublished logs included (`LogSummary.isPublished`).
    public var summaries: [LogSummary] = []
    /// What the commit made available to the mesh, for replication to push: the operations it
    /// stored for the first time (received or local, any status) in published logs, and every
    /// operation of a log it published (a conversation's first message, or an announced
    /// creation, takes the operations made before it along; SPEC.md §13.7).
    public var storedOperations: [SignedOperation] = []
    /// What the removal rule (§13.3) is told after this commit: the membership of every log
    /// of each merge group with a removal whose membership the commit changed.
    public var memberships: [LogMembership] = []
    /// How many batches this subscriber did not receive just before this one, because it fell
    /// more than `Store.changeBufferLimit` batches behind. Nonzero means: re-read what you
    /// show (a live query simply runs again).
    public var missedBatches: Int = 0
}

/// An outbox entry added or changed by a commit.
public struct OutboxChange: Sendable, Equatable {
    /// The entry as it is after the commit.
    public var entry: OutboxEntry
    /// Its state before, nil for a new entry.
    public var previousState: OutboxEntry.State?
    /// The message as it is after the commit; nil if it was deleted.
    public var message: MessageSnapshot?
}

extension Store {
    /// Batches each subscriber may have waiting. A subscriber that falls further behind loses
    /// the oldest waiting batches (the newest are kept, so the last change is always told), and
    /// learns it from `CommittedChanges.missedBatches` on the next one it receives: a slow or
    /// forgotten subscriber costs the store at most this many batches, never more.
    public static let changeBufferLimit = 128

    /// A new stream of what each commit changes, from now on, for one consumer. Iterate it
    /// from one task; dropping it (or cancelling the task iterating it) unsubscribes.
    ///
    /// - Parameter includingMessages: false for a consumer that reads only the logs' summaries
    ///   and stored operations (replication). While no subscriber includes messages, some
    ///   commits skip reading back the messages they only update: marking outbox entries sent
    ///   publishes them without their message, and a node's storer (`LocalAuthor.receive(_:
    ///   completeChanges:)`) publishes received receipts' updated messages without their
    ///   parts. A subscriber that includes messages and joins while such a commit is under way
    ///   does not get that batch; it learns so from `CommittedChanges.missedBatches` on the
    ///   next one, like a subscriber that fell behind.
    public func changes(includingMessages: Bool = true) -> ChangeStream {
        subscribers.subscribe(limit: Self.changeBufferLimit, includingMessages: includingMessages)
    }

    /// The number of the latest published batch (0 before the first): a subscriber that has
    /// received this one has seen every commit so far.
    public var latestChangeNumber: UInt64 { subscribers.latestNumber }
}

/// The batches `Store.changes()` delivers, each with `missedBatches` filled in.
public struct ChangeStream: AsyncSequence, Sendable {
    public typealias Element = CommittedChanges
    public typealias Failure = Never

    let base: AsyncStream<CommittedChanges>
    /// The number the first batch for this subscriber will carry, if none is dropped.
    let firstNumber: UInt64

    public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), expected: firstNumber) }

    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<CommittedChanges>.Iterator
        var expected: UInt64

        public mutating func next() async -> CommittedChanges? {
            counted(await base.next())
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> CommittedChanges? {
            counted(await base.next(isolation: actor))
        }

        /// Numbers only grow and the buffer drops the oldest, so the gap is what was lost.
        private mutating func counted(_ batch: CommittedChanges?) -> CommittedChanges? {
            guard var batch else { return nil }
            batch.missedBatches = Int(batch.number - expected)
            expected = batch.number + 1
            return batch
        }
    }
}

/// The subscribers of one store and the count of published batches. Publishing happens on
/// GRDB's writer queue right after each commit, so batches go out in commit order.
final class ChangeSubscribers: Sendable {
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

    func publish(_ publication: Store.Publication) {
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
