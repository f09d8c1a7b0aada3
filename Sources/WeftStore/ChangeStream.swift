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
