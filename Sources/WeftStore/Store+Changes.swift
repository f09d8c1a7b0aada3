// The change bus, as the store shows it (`ChangeBus`).
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
        changeBus.subscribe(limit: Self.changeBufferLimit, includingMessages: includingMessages)
    }

    /// The number of the latest published batch (0 before the first): a subscriber that has
    /// received this one has seen every commit so far.
    public var latestChangeNumber: UInt64 { changeBus.latestNumber }
}

