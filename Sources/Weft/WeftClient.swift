import Foundation
import WeftCrypto
import WeftModel
import WeftStore

/// The client API: conversations and messages for the local user, over a `LocalAuthor` (the
/// local user's identity and clock over a `Store`).
///
/// A thin layer: it validates what callers pass (MIME types, participation, the protocol's
/// limits) and translates between the store's types and the client's. Sending validates, stores
/// the message and its outbox entry in one transaction, and returns at once. Delivered receipts,
/// the clock and the change stream live below it, so operations applied by replication
/// acknowledge and notify exactly like those received here.
public actor WeftClient {
    /// How long the outbox keeps trying to send a message (the SDK's 12 hours).
    public static let defaultTimeToLive: Duration = .seconds(12 * 3600)

    /// The local user as author (signs and posts); for this package's node and tests.
    nonisolated package let localAuthor: LocalAuthor
    nonisolated package var store: Store { localAuthor.store }
    nonisolated public var localUser: UserID { localAuthor.localUser }
    private let timeToLive: Duration
    /// Parts larger than this many bytes travel as rich content (SPEC.md §17), when the
    /// client has a `contentImporter`: the SDK's 2 KB.
    public private(set) var richContentThreshold = 2048
    /// Where rich content goes (a node's content service); nil: every part stays inline, up to
    /// the operation limit.
    public private(set) var contentImporter: (any ContentImporter)?
    /// Where the content parts of messages are fetched and followed (a node's content
    /// service); nil: the client reports no rich content's progress.
    public private(set) var contentTransfers: (any ContentTransfers)?

    public init(
        localAuthor: LocalAuthor, timeToLive: Duration = WeftClient.defaultTimeToLive, contentImporter: (any ContentImporter)? = nil,
        contentTransfers: (any ContentTransfers)? = nil
    ) {
        self.localAuthor = localAuthor
        self.timeToLive = timeToLive
        self.contentImporter = contentImporter
        self.contentTransfers = contentTransfers
    }

    /// Sends parts over `threshold` bytes as rich content through `importer`.
    public func useRichContent(_ importer: any ContentImporter, threshold: Int = 2048) {
        contentImporter = importer
        richContentThreshold = max(0, threshold)
    }

    /// Follows and fetches the content parts of messages through `transfers`.
    public func followContent(_ transfers: any ContentTransfers) {
        contentTransfers = transfers
    }

    /// A client over `store` for `identity`, which must be the store's local user.
    /// - Parameter wallClock: milliseconds since 1970; tests inject their own.
    /// - Parameter contentImporter: where parts over 2048 bytes go as rich content; nil keeps
    ///   every part inline.
    /// - Parameter contentTransfers: where the content parts of messages are fetched and
    ///   followed (`contentProgress(ofPart:in:)`); nil: nowhere.
    public init(
        store: Store, identity: NodeIdentity, timeToLive: Duration = WeftClient.defaultTimeToLive,
        wallClock: @escaping @Sendable () -> UInt64 = LocalAuthor.systemClock, contentImporter: (any ContentImporter)? = nil,
        contentTransfers: (any ContentTransfers)? = nil
    ) throws(WeftError) {
        let localAuthor: LocalAuthor
        do {
            localAuthor = try LocalAuthor(store: store, identity: identity, wallClock: wallClock)
        } catch {
            throw .storage("\(error)")
        }
        self.init(localAuthor: localAuthor, timeToLive: timeToLive, contentImporter: contentImporter, contentTransfers: contentTransfers)
    }

    // MARK: - Conversations

    /// Creates a conversation with `participants` (the local user is implicit). A distinct
    /// conversation for a set that already has one returns the existing one.
    public func createConversation(
        with participants: Set<UserID>, options: ConversationOptions = ConversationOptions()
    ) async throws(WeftError) -> Conversation {
        let others = participants.subtracting([localUser])
        guard !others.isEmpty else { throw .noParticipants }
        try checkLimits(.createConversation(
            participants: others.union([localUser]).sorted(), distinct: options.distinct, generation: 0, metadata: options.metadata))
        let created = try await storeWrite {
            try await localAuthor.createConversation(
                with: others, distinct: options.distinct, metadata: options.metadata, announce: options.announce)
        }
        guard let conversation = try await conversation(created.conversation) else { throw .unknownConversation(created.conversation.hex) }
        return conversation
    }

    public func addParticipants(_ users: Set<UserID>, to conversation: ConversationID) async throws(WeftError) {
        guard !users.isEmpty else { return }
        try await writeToGroup(.addParticipants(users.sorted()), conversation)
    }

    public func removeParticipants(_ users: Set<UserID>, from conversation: ConversationID) async throws(WeftError) {
        guard !users.isEmpty else { return }
        try await writeToGroup(.removeParticipants(users.sorted()), conversation)
    }

    /// Sets metadata keys; a nil value removes the key.
    public func setMetadata(_ entries: [String: String?], in conversation: ConversationID) async throws(WeftError) {
        guard !entries.isEmpty else { return }
        try checkLimits(.setMetadata(entries))
        try await write(.setMetadata(entries), inLogs: [await participating(conversation)])
    }

    // MARK: - Messages

    /// Validates and stores a message with its outbox entry in one transaction, and returns at
    /// once; the node sends it when a peer is reachable (see `Store.outbox()`).
    @discardableResult
    public func send(
        _ parts: [MessagePart], options: MessageOptions = MessageOptions(), in conversation: ConversationID
    ) async throws(WeftError) -> Message {
        let parts = try await withRichContent(parts)
        let canonical = try await postingLog(parts, options: options, in: conversation)
        let posted = try await storeWrite { try await localAuthor.postShowing(parts, options: options, in: canonical, timeToLive: timeToLiveMilliseconds) }
        return try await sentMessage(posted)
    }

    /// A message for `send(_:)`, which sends several at once.
    public struct OutgoingMessage: Sendable {
        public var parts: [MessagePart]
        public var options: MessageOptions
        public var conversation: ConversationID

        public init(_ parts: [MessagePart], options: MessageOptions = MessageOptions(), in conversation: ConversationID) {
            self.parts = parts
            self.options = options
            self.conversation = conversation
        }
    }

    /// Sends several messages, each validated and stored as `send(_:options:in:)` would, and
    /// returns at once: they are queued for the store together, so they share its commits
    /// (and the messages of one conversation keep the order given). Returns each one's message
    /// or why it was refused, in order; a refusal leaves the others.
    public func send(_ messages: [OutgoingMessage]) async -> [Result<Message, WeftError>] {
        var results = [Result<Message, WeftError>?](repeating: nil, count: messages.count)
        var postings: [(index: Int, posting: LocalAuthor.Posting)] = []
        for (index, message) in messages.enumerated() {
            do throws(WeftError) {
                let parts = try await withRichContent(message.parts)
                let canonical = try await postingLog(parts, options: message.options, in: message.conversation)
                postings.append((index, LocalAuthor.Posting(parts, options: message.options, in: canonical, timeToLive: timeToLiveMilliseconds)))
            } catch {
                results[index] = .failure(error)
            }
        }
        let outcomes = await localAuthor.postShowing(postings.map(\.posting))
        for ((index, _), outcome) in zip(postings, outcomes) {
            switch outcome {
            case .success(let posted):
                do throws(WeftError) {
                    results[index] = .success(try await sentMessage(posted))
                } catch {
                    results[index] = .failure(error)
                }
            case .failure(let error):
                results[index] = .failure(Self.translate(error))
            }
        }
        return results.map { $0! }
    }

    /// Validates a message for sending; returns the log it goes to (the canonical conversation).
    private func postingLog(
        _ parts: [MessagePart], options: MessageOptions, in conversation: ConversationID
    ) async throws(WeftError) -> ConversationID {
        guard !parts.isEmpty else { throw .noParts }
        for part in parts where !MessagePart.isValidMIMEType(part.mimeType) { throw .invalidMIMEType(part.mimeType) }
        try checkLimits(.postMessage(parts: parts, options: options))
        guard let membership = try await storeRead({ try await store.fetchMembership(of: localUser, in: conversation) }) else {
            throw .unknownConversation(conversation.hex)
        }
        guard membership.isParticipant else { throw .notAParticipant }
        return membership.canonical
    }

    private var timeToLiveMilliseconds: UInt64 { UInt64(timeToLive.components.seconds) * 1000 }

    /// The message a post stored, as its commit wrote it (in the outbox, so not sent yet).
    private func sentMessage(_ posted: (post: SignedOperation, message: MessageSnapshot?)) async throws(WeftError) -> Message {
        if let snapshot = posted.message { return Message(snapshot, localUser: localUser, unsent: true) }
        guard let message = try await message(posted.post.id) else { throw .unknownMessage(posted.post.id.hex) }
        return message
    }

    /// Marks one message read by the local user.
    public func markAsRead(_ message: OperationID) async throws(WeftError) {
        guard let target = try await self.message(message) else { throw .unknownMessage(message.hex) }
        guard target.sender != localUser else { return }
        // A user no longer in the conversation cannot mark it read (§13.3): say so, rather
        // than succeed at nothing.
        let membership = try await storeRead { try await store.fetchMembership(of: localUser, in: target.conversation) }
        guard membership?.isParticipant == true else { throw .notAParticipant }
        guard target.isUnread else { return }
        try await write(.read([message]), inLogs: [await postedTo(message)])
    }

    /// Marks every message of the conversation read with one operation per merged log: a
    /// watermark covering everything the local user has seen.
    public func markAllMessagesAsRead(in conversation: ConversationID) async throws(WeftError) {
        try await writeToGroup(.markAllRead, conversation)
    }

    /// Deletes the local user's own message for everyone.
    public func delete(_ message: OperationID) async throws(WeftError) {
        guard let target = try await self.message(message) else { throw .unknownMessage(message.hex) }
        guard target.sender == localUser else { throw .notPermitted("only the sender may delete a message") }
        try await write(.deleteMessage(message), inLogs: [await postedTo(message)])
    }

    // MARK: - Receiving

    /// Applies operations from peers; the local author records delivery of new messages addressed to
    /// the local user in the same commit. Returns the refused ones.
    @discardableResult
    package func receive(_ operations: [SignedOperation]) async throws(WeftError) -> [(OperationID, String)] {
        let applied = try await storeWrite { try await localAuthor.receive(operations) }
        return applied.refused.map { ($0.operation, $0.error.description) }
    }

    /// Records that the outbox handed a message to the mesh.
    package func markSent(_ message: OperationID) async throws(WeftError) {
        try await storeWrite { try await store.markSent(message) }
    }

    // MARK: - Reading
    //
    // Reads are async: the store reads on GRDB's threads while the client's task waits
    // suspended, so no thread of the cooperative pool waits on SQLite.

    /// The conversation, or the one it was merged into.
    public func conversation(_ id: ConversationID) async throws(WeftError) -> Conversation? {
        try await storeRead { try await store.fetchConversation(id) }.map(Conversation.init)
    }

    public func message(_ id: OperationID) async throws(WeftError) -> Message? {
        guard let snapshot = try await storeRead({ try await store.fetchMessage(id) }) else { return nil }
        return Message(snapshot, localUser: localUser, unsent: try await unsentMessages(among: [snapshot.id]).contains(snapshot.id))
    }

    public func conversations(_ query: ConversationQuery = ConversationQuery()) async throws(WeftError) -> [Conversation] {
        try await storeRead { try await store.fetchConversations(query) }.map(Conversation.init)
    }

    public func messages(_ query: MessageQuery) async throws(WeftError) -> [Message] {
        let snapshots = try await storeRead { try await store.fetchMessages(query) }
        let unsent = try await unsentMessages(among: snapshots.map(\.id))
        return snapshots.map { Message($0, localUser: localUser, unsent: unsent.contains($0.id)) }
    }

    /// The bytes of part `index` of `message`: a queried message carries the bytes of parts of
    /// at most 2048 bytes; larger inline parts are read from the log only when asked for here.
    public func data(ofPart index: Int, in message: OperationID) async throws(WeftError) -> [UInt8] {
        guard let data = try await storeRead({ try await store.fetchPartData(of: message, index: index) }) else {
            throw .unknownMessage("\(message.hex) part \(index)")
        }
        return data
    }

    public func count(_ query: ConversationQuery) async throws(WeftError) -> Int { try await storeRead { try await store.fetchCount(query) } }
    public func count(_ query: MessageQuery) async throws(WeftError) -> Int { try await storeRead { try await store.fetchCount(query) } }

    /// The object named by a `weft:///` URL as soon as it exists, or `timedOut`.
    public func waitForObject(_ url: URL, timeout: Duration) async throws(WeftError) -> ObjectChange.Object {
        let identifier = try WeftIdentifier(url: url)
        // Subscribed before the first look, so nothing committed in between is missed.
        let changes = store.changes()
        if let found = try await lookUp(identifier) { return found }
        let deadline = ContinuousClock.now + timeout
        let outcome: Result<ObjectChange.Object?, WeftError> = await withTaskGroup(of: Result<ObjectChange.Object?, WeftError>.self) { group in
            group.addTask {
                for await _ in changes {
                    do throws(WeftError) {
                        if let found = try await self.lookUp(identifier) { return .success(found) }
                    } catch {
                        return .failure(error)
                    }
                }
                return .success(nil)
            }
            group.addTask {
                try? await Task.sleep(until: deadline)
                return .success(nil)
            }
            let first = await group.next() ?? .success(nil)
            group.cancelAll()
            return first
        }
        if let found = try outcome.get() { return found }
        // A change may have landed between the last check and the deadline.
        if let found = try await lookUp(identifier) { return found }
        throw .timedOut(identifier.description)
    }

    private func lookUp(_ identifier: WeftIdentifier) async throws(WeftError) -> ObjectChange.Object? {
        switch identifier {
        case .conversation(let id): try await conversation(id).map(ObjectChange.Object.conversation)
        case .message(let id): try await message(id).map(ObjectChange.Object.message)
        }
    }

    // MARK: - Changes

    /// A new stream of change batches, from now on: one per commit of the store, whoever wrote
    /// (this client, peers through replication, the outbox), empty when the commit changed
    /// nothing the client shows (an outbox attempt). The store keeps at most
    /// `Store.changeBufferLimit` batches for a subscriber that falls behind, dropping the oldest:
    /// `ObjectChanges.missedBatches` on the next batch says how many it lost.
    nonisolated public func changes() -> ObjectChangeStream {
        ObjectChangeStream(base: store.changes(), localUser: localUser)
    }

    /// A new stream of delivery events for the local user's messages, from now on: sent,
    /// then per recipient delivered, read or failed (with the reason), as commits reveal them
    /// (see `DeliveryEvent`).
    nonisolated public func deliveryEvents() -> DeliveryEventStream {
        DeliveryEventStream(base: store.changes(), localUser: localUser)
    }

    // MARK: - Writing

    private func write(_ body: OperationBody, inLogs logs: [ConversationID]) async throws(WeftError) {
        _ = try await storeWrite { try await localAuthor.write(body, in: logs) }
    }

    /// Membership changes and watermarks go to every log of the merge group, so they hold for
    /// the whole merged conversation (SPEC §13.3).
    private func writeToGroup(_ body: OperationBody, _ conversation: ConversationID) async throws(WeftError) {
        try checkLimits(body)
        let canonical = try await participating(conversation)
        guard let found = try await self.conversation(canonical) else { throw .unknownConversation(canonical.hex) }
        try await write(body, inLogs: [canonical] + found.mergedIdentifiers)
    }

    /// The canonical conversation, if the local user is a participant of it.
    private func participating(_ conversation: ConversationID) async throws(WeftError) -> ConversationID {
        guard let found = try await self.conversation(conversation) else { throw .unknownConversation(conversation.hex) }
        guard found.participants.contains(localUser) else { throw .notAParticipant }
        return found.id
    }

    /// The log a message was posted to (receipts and deletions must follow it there).
    private func postedTo(_ message: OperationID) async throws(WeftError) -> ConversationID {
        guard let found = try await storeRead({ try await store.fetchMessage(message) }) else { throw .unknownMessage(message.hex) }
        return found.postedTo
    }

    /// Refuses, before anything is encoded or signed, a body the protocol cannot carry: more
    /// participants, metadata keys or parts than a list holds, a text field over 65,535 bytes,
    /// or an operation over `Operation.maxByteCount` (SPEC §12.1, §12.3).
    private func checkLimits(_ body: OperationBody) throws(WeftError) {
        if let violation = body.limitViolation { throw .tooLarge(violation) }
    }

    /// Which of `messages` wait in the outbox (`Store.fetchOutbox()` lists only those).
    private func unsentMessages(among messages: [OperationID]) async throws(WeftError) -> Set<OperationID> {
        try await storeRead { try await store.fetchWaiting(among: messages) }
    }

    /// A store read; any failure is a storage failure.
    private func storeRead<T>(_ body: () async throws -> T) async throws(WeftError) -> T {
        do {
            return try await body()
        } catch {
            throw .storage("\(error)")
        }
    }

    private func storeWrite<T>(_ body: () async throws -> T) async throws(WeftError) -> T {
        do {
            return try await body()
        } catch {
            throw Self.translate(error)
        }
    }

    /// The store's `tooLarge` is the client's; anything else is a storage failure.
    private static func translate(_ error: any Error) -> WeftError {
        if let error = error as? StoreError, error.code == .tooLarge { return .tooLarge(error.message) }
        return .storage("\(error)")
    }
}
