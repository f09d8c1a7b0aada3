import WeftModel

// The outbox (`Outbox`): messages accepted for sending, kept until the mesh has them or they
// fail, and the per-recipient failures of the local user's messages (`DeliveryFailures`).
extension Store {
    /// Entries still waiting to be sent (neither sent nor failed), oldest first.
    public func fetchOutbox() async throws -> [OutboxEntry] { try await outgoing.fetchWaitingEntries() }

    /// `fetchOutbox()`, blocking the calling thread.
    public func outbox() throws -> [OutboxEntry] { try outgoing.waitingEntries() }

    /// Which of `messages` wait in the outbox (neither sent nor failed).
    public func fetchWaiting(among messages: [OperationID]) async throws -> Set<OperationID> {
        try await outgoing.fetchWaiting(among: messages)
    }

    /// `fetchWaiting(among:)`, blocking the calling thread.
    public func waiting(among messages: [OperationID]) throws -> Set<OperationID> { try outgoing.waiting(among: messages) }

    /// Every entry, whatever its state, oldest first.
    public func outboxEntries() throws -> [OutboxEntry] { try outgoing.entries() }

    /// The mesh has the message: it leaves the outbox.
    public func markSent(_ message: OperationID) async throws { try await outgoing.markSent(message) }

    /// Notes why these messages, if still waiting, are not sent yet (a rule withholds them from
    /// the peers connected, SPEC.md §13.3): their pending recipients show the reason, and a
    /// message whose time to live runs out fails with it. Sending clears it.
    public func noteWaiting(_ messages: [OperationID], reason: String) async throws {
        try await outgoing.noteWaiting(messages, reason: reason)
    }

    /// A peer acknowledged storing these operations (SPEC.md §14): those of them in the outbox
    /// are sent, in one transaction. Operations with no entry (someone else's, or not a
    /// message) are ignored; a message that had failed (its time to live ran out) and still
    /// reached a node is sent after all. Returns the messages that became sent.
    @discardableResult
    public func markSent(among operations: [OperationID]) async throws -> [OperationID] {
        try await outgoing.markSent(among: operations)
    }

    /// A peer acknowledged storing the operations in these slots (SPEC.md §14.7): the local
    /// user's messages among them that wait in the outbox (or failed) are sent, in one
    /// transaction. Returns the messages that became sent.
    @discardableResult
    public func markSent(acknowledged ranges: [SlotRange]) async throws -> [OperationID] {
        try await outgoing.markSent(acknowledged: ranges)
    }

    /// The local user's messages not sent yet (waiting, or failed) whose operations lie in
    /// `ranges`, leaving out any whose slot holds another operation here too; blocks the
    /// calling thread.
    public func unsentMessages(acknowledgedIn ranges: [SlotRange]) throws -> [OperationID] {
        try outgoing.unsentMessages(acknowledgedIn: ranges)
    }

    /// The message failed for good, with the reason (one line, for the sender's callback).
    public func markFailed(_ message: OperationID, reason: String) async throws {
        try await outgoing.markFailed(message, reason: reason)
    }

    /// Counts one more attempt to send the message.
    public func recordAttempt(_ message: OperationID) async throws { try await outgoing.recordAttempt(message) }

    /// Fails every waiting entry whose time to live ran out by `wallMilliseconds`, and returns
    /// them. Every message whose time to live ran out, sent or not, also fails for each
    /// recipient whose node has not delivered it ("expired: not delivered within 12 h";
    /// `RecipientStatus.failed`), once.
    public func expireOutbox(wallMilliseconds: UInt64) async throws -> [OutboxEntry] {
        try await outgoing.expireOutbox(wallMilliseconds: wallMilliseconds)
    }

    /// Records that `message` (the local user's) failed for `recipients`, or for every
    /// recipient not yet delivered when nil; a recipient already delivered, or failed before,
    /// is left as it is. Returns the recipients that failed now. The failure is a local record,
    /// never replicated: it shows as `RecipientStatus.failed` while the replicated status is
    /// below delivered, and a delivery that arrives later wins.
    @discardableResult
    public func failDelivery(
        of message: OperationID, to recipients: Set<UserID>? = nil, reason: DeliveryFailure, wallMilliseconds: UInt64
    ) async throws -> Set<UserID> {
        try await failures.failDelivery(of: message, to: recipients, reason: reason, wallMilliseconds: wallMilliseconds)
    }
}
