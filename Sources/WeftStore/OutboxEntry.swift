import WeftModel

/// A message accepted for sending (DESIGN.md: "Sending validates, stores the message durably in
/// the outbox and returns at once"). Written in the same transaction as the message itself, so
/// after a crash either both are there or neither is.
public struct OutboxEntry: Sendable, Hashable {
    /// How long a message is retried before it fails for good: 12 hours.
    public static let defaultTimeToLive: UInt64 = 12 * 60 * 60 * 1000

    public enum State: Sendable, Hashable {
        /// Not yet sent: the sync layer offers it whenever a peer is reachable.
        case waiting
        /// The mesh has it.
        case sent
        /// Given up, with the reason (e.g. its time to live ran out).
        case failed(reason: String)
    }

    /// The message (its post operation's identifier).
    public var message: OperationID
    /// The conversation log it was posted to.
    public var conversation: ConversationID
    /// Wall-clock milliseconds since 1970 when it was accepted.
    public var createdAt: UInt64
    /// Wall-clock milliseconds after which it fails ("time to live expired").
    public var expiresAt: UInt64
    /// How many times it was offered to a peer.
    public var attempts: Int
    public var state: State

    public init(
        message: OperationID, conversation: ConversationID, createdAt: UInt64,
        timeToLive: UInt64 = OutboxEntry.defaultTimeToLive, attempts: Int = 0, state: State = .waiting
    ) {
        self.message = message
        self.conversation = conversation
        self.createdAt = createdAt
        self.expiresAt = createdAt.addingReportingOverflow(timeToLive).overflow ? .max : createdAt + timeToLive
        self.attempts = attempts
        self.state = state
    }

    /// An entry for a post operation, created now.
    public init(posting operation: SignedOperation, createdAt: UInt64, timeToLive: UInt64 = OutboxEntry.defaultTimeToLive) {
        self.init(
            message: operation.id, conversation: operation.operation.conversation, createdAt: createdAt,
            timeToLive: timeToLive)
    }
}
