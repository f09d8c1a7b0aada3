import Foundation
import Synchronization
import WeftCrypto
import WeftModel

/// The local user as the author of operations: their identity and hybrid logical clock over the
/// `Store`. Everything the local user writes goes through here, and so does everything a node
/// receives:
///
/// - `receive(_:)` applies operations from peers and, in the same commit, the local user's
///   delivered receipts for the new messages addressed to them, so whatever applies operations
///   (the client, or replication below it) acknowledges them alike;
/// - the write methods sign with the author's clock, against the replica as it stands inside
///   the write, so concurrent writers never pick the same sequence number.
///
/// Changes reach `store.changes()` subscribers after each commit, whoever wrote.
public final class LocalAuthor: Sendable {
    /// Milliseconds since 1970 from the system clock.
    public static let systemClock: @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }

    public let store: Store
    /// The local user's signing identity and clock. Only writes use it, each on the store's
    /// writer queue, so the lock is never contended.
    let author: Mutex<Author>
    let wallClock: @Sendable () -> UInt64

    /// - Parameter wallClock: milliseconds since 1970; tests inject their own.
    /// - Throws: `StoreError.wrongLocalUser` when `identity` is not the store's local user.
    public init(store: Store, identity: NodeIdentity, wallClock: @escaping @Sendable () -> UInt64 = LocalAuthor.systemClock) throws {
        guard identity.publicKey == store.localUser else {
            throw StoreError(.wrongLocalUser, "the identity \(identity.publicKey) is not the store's local user \(store.localUser)")
        }
        self.store = store
        self.author = Mutex(Author(identity: identity))
        self.wallClock = wallClock
    }

    /// Posts waiting for the next group commit (`LocalAuthor+Posting.swift`).
    let posts = Mutex(PostQueue())

    public var localUser: UserID { store.localUser }

    // MARK: - Receiving

    /// Applies operations received from peers (see `Store.apply(received:wallMilliseconds:)`)
    /// and, in the same transaction, the local user's delivered receipts for the messages it
    /// stored that are addressed to the local user: one receipt operation per conversation log
    /// (`Applied.acknowledgements`).
    public func receive(_ operations: [SignedOperation]) async throws -> Store.Applied {
        let batch = try await store.checkSignatures(operations)
        return try await receive(batch)
    }

    /// `receive(_:)` for operations whose signatures were checked beforehand
    /// (`Store.checkSignatures(_:)`): a node checks the next batch while this one is written.
    ///
    /// - Parameter completeChanges: false for a caller that does not read `Applied.changes`:
    ///   while no subscriber reads messages either, messages the batch only updates
    ///   (receipts) are not read back, and their snapshots there come without parts.
    public func receive(_ batch: Store.CheckedBatch, completeChanges: Bool = true) async throws -> Store.Applied {
        let now = wallClock()
        return try await store.apply(
            received: batch, wallMilliseconds: now,
            acknowledgingWith: { body, log, replica in
                self.author.withLock { $0.write(body, in: log, replica: replica, wallMilliseconds: now) }
            },
            completeChanges: completeChanges)
    }

    // MARK: - Writing

    /// Creates a conversation with `others` (the local user is implicit). A distinct
    /// conversation for a participant set that already has one is not created again: its
    /// identifier is returned, and `created` is false.
    ///
    /// The conversation stays on this node until a message is posted in it; `announce`
    /// publishes it at once (an existing one too), with what was written in it before
    /// (SPEC.md §13.7).
    public func createConversation(
        with others: Set<UserID>, distinct: Bool = true, metadata: [String: String] = [:], announce: Bool = false
    ) async throws -> (conversation: ConversationID, created: Bool) {
        let participants = others.union([localUser])
        try Self.checkLimits(.createConversation(participants: participants.sorted(), distinct: distinct, generation: 0, metadata: metadata))
        let now = wallClock()
        let (_, found) = try await store.commitLocal { replica in
            if distinct, let existing = replica.distinctConversation(for: participants) {
                return (Store.LocalBatch(operations: [], publishing: announce ? [existing] : []), (existing, false))
            }
            let creation = self.author.withLock {
                $0.createConversation(with: others, distinct: distinct, metadata: metadata, in: replica, wallMilliseconds: now)
            }
            let id = creation.operation.conversation
            return (Store.LocalBatch(operations: [creation], publishing: announce ? [id] : []), (id, true))
        }
        return found
    }

    /// Writes `body` once in each of `logs` (conversation logs, not resolved to their canonical
    /// conversation: callers choose, e.g. every log of a merge group), in one transaction.
    @discardableResult
    public func write(_ body: OperationBody, in logs: [ConversationID]) async throws -> [SignedOperation] {
        try Self.checkLimits(body)
        let logs = Array(Set(logs)).sorted()
        let now = wallClock()
        return try await store.commitLocal { replica in
            let operations = self.author.withLock { author in
                logs.map { author.write(body, in: $0, replica: replica, wallMilliseconds: now) }
            }
            return (Store.LocalBatch(operations: operations), operations)
        }.extra
    }

    /// Posts a message to `log` and puts it in the outbox, in one transaction; it waits there
    /// until the node hands it to a peer or its time to live (milliseconds) runs out.
    public func post(
        _ parts: [MessagePart], options: MessageOptions = MessageOptions(), in log: ConversationID,
        timeToLive: UInt64 = OutboxEntry.defaultTimeToLive
    ) async throws -> SignedOperation {
        try await postShowing(parts, options: options, in: log, timeToLive: timeToLive).post
    }

    /// Refuses, before anything is encoded, a body the encoding cannot carry.
    static func checkLimits(_ body: OperationBody) throws {
        if let violation = body.limitViolation { throw StoreError(.tooLarge, "\(violation) does not fit in an operation") }
    }
}
