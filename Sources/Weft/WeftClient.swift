import Foundation
import WeftCrypto
import WeftModel
import WeftStore

/// The client API: conversations and messages for the local user, over a `Store`.
///
/// Every change goes through here as a signed operation; sending validates, stores the
/// message and its outbox entry in one transaction, and returns at once. Changes from this
/// client and from peers (`receive`) are broadcast to every `changes()` stream and live query.
public actor WeftClient {
    /// How long the outbox keeps trying to send a message (the SDK's 12 hours).
    public static let defaultTimeToLive: Duration = .seconds(12 * 3600)

    nonisolated public let store: Store
    private var author: Author
    private let wallClock: @Sendable () -> UInt64
    private let timeToLive: Duration
    private var subscribers: [UUID: AsyncStream<[ObjectChange]>.Continuation] = [:]

    /// - Parameter wallClock: milliseconds since 1970; tests inject their own.
    public init(
        store: Store, identity: NodeIdentity, timeToLive: Duration = WeftClient.defaultTimeToLive,
        wallClock: @escaping @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }
    ) {
        self.store = store
        self.author = Author(identity: identity)
        self.wallClock = wallClock
        self.timeToLive = timeToLive
    }

    public var localUser: UserID { author.user }

    // MARK: - Conversations

    /// Creates a conversation with `participants` (the local user is implicit). A distinct
    /// conversation for a set that already has one returns the existing one.
    public func createConversation(
        with participants: Set<UserID>, options: ConversationOptions = ConversationOptions()
    ) throws(WeftError) -> Conversation {
        let others = participants.subtracting([localUser])
        guard !others.isEmpty else { throw .noParticipants }
        try checkLimits(.createConversation(participants: others.sorted(), distinct: options.distinct, generation: 0, metadata: options.metadata))
        if options.distinct, let existing = try storeCall({ try store.distinctConversation(for: others.union([localUser])) }) {
            return try conversation(existing)!
        }
        let now = wallClock()
        let created = try commit { author, replica in
            [author.createConversation(with: others, distinct: options.distinct, metadata: options.metadata, in: replica, wallMilliseconds: now)]
        }
        return try conversation(created[0].operation.conversation)!
    }

    public func addParticipants(_ users: Set<UserID>, to conversation: ConversationID) throws(WeftError) {
        guard !users.isEmpty else { return }
        try writeToGroup(.addParticipants(users.sorted()), conversation)
    }

    public func removeParticipants(_ users: Set<UserID>, from conversation: ConversationID) throws(WeftError) {
        guard !users.isEmpty else { return }
        try writeToGroup(.removeParticipants(users.sorted()), conversation)
    }

    /// Sets metadata keys; a nil value removes the key.
    public func setMetadata(_ entries: [String: String?], in conversation: ConversationID) throws(WeftError) {
        guard !entries.isEmpty else { return }
        try checkLimits(.setMetadata(entries))
        try write(.setMetadata(entries), in: conversation)
    }

    // MARK: - Messages

    /// Validates and stores a message with its outbox entry in one transaction, and returns at
    /// once; the node sends it when a peer is reachable (see `Store.outbox()`).
    @discardableResult
    public func send(
        _ parts: [MessagePart], options: MessageOptions = MessageOptions(), in conversation: ConversationID
    ) throws(WeftError) -> Message {
        guard !parts.isEmpty else { throw .noParts }
        for part in parts where !MessagePart.isValidMIMEType(part.mimeType) { throw .invalidMIMEType(part.mimeType) }
        try checkLimits(.postMessage(parts: parts, options: options))
        let canonical = try participating(conversation)
        let now = wallClock()
        let ttl = UInt64(timeToLive.components.seconds) * 1000
        let posted = try commit(outbox: { OutboxEntry(posting: $0[0], createdAt: now, timeToLive: ttl) }) { author, replica in
            [author.write(.postMessage(parts: parts, options: options), in: canonical, replica: replica, wallMilliseconds: now)]
        }
        return try message(posted[0].id)!
    }

    /// Marks one message read by the local user.
    public func markAsRead(_ message: OperationID) throws(WeftError) {
        guard let target = try self.message(message) else { throw .unknownMessage(message.hex) }
        guard target.sender != localUser, target.isUnread else { return }
        try write(.read([message]), inLog: postedTo(message))
    }

    /// Marks every message of the conversation read with one operation per merged log: a
    /// watermark covering everything the local user has seen.
    public func markAllMessagesAsRead(in conversation: ConversationID) throws(WeftError) {
        try writeToGroup(.markAllRead, conversation)
    }

    /// Deletes the local user's own message for everyone.
    public func delete(_ message: OperationID) throws(WeftError) {
        guard let target = try self.message(message) else { throw .unknownMessage(message.hex) }
        guard target.sender == localUser else { throw .notPermitted("only the sender may delete a message") }
        try write(.deleteMessage(message), inLog: postedTo(message))
    }

    // MARK: - Receiving

    /// Applies operations from peers, then records delivery of new messages addressed to the
    /// local user (delivered is set by the recipient's node). Returns the refused ones.
    @discardableResult
    public func receive(_ operations: [SignedOperation]) throws(WeftError) -> [(OperationID, String)] {
        let applied: Store.Applied
        do {
            applied = try store.apply(received: operations, wallMilliseconds: wallClock())
        } catch {
            throw .storage("\(error)")
        }
        publish(applied.changes)
        var deliveredByLog: [ConversationID: [OperationID]] = [:]
        for change in applied.changes.messages where change.kind == .create {
            guard let snapshot = change.snapshot, snapshot.sender != localUser,
                snapshot.recipientStatus[localUser] == .sent
            else { continue }
            deliveredByLog[snapshot.postedTo, default: []].append(snapshot.id)
        }
        for (log, messages) in deliveredByLog.sorted(by: { $0.key < $1.key }) {
            try write(.delivered(messages), inLog: log)
        }
        return applied.refused.map { ($0.operation, $0.error.description) }
    }

    /// Records that the outbox handed a message to the mesh.
    public func markSent(_ message: OperationID) throws(WeftError) {
        do {
            try store.markSent(message)
        } catch {
            throw .storage("\(error)")
        }
        if let sent = try self.message(message) {
            publish([ObjectChange(object: .message(sent), kind: .update, property: "isSent", oldValue: .bool(false), newValue: .bool(true))])
        }
    }

    // MARK: - Reading

    /// The conversation, or the one it was merged into.
    public func conversation(_ id: ConversationID) throws(WeftError) -> Conversation? {
        try storeCall { try store.conversation(id) }.map(Conversation.init)
    }

    public func message(_ id: OperationID) throws(WeftError) -> Message? {
        guard let snapshot = try storeCall({ try store.message(id) }) else { return nil }
        return try wrap(snapshot)
    }

    public func conversations(_ query: ConversationQuery = ConversationQuery()) throws(WeftError) -> [Conversation] {
        try storeCall { try store.conversations(query) }.map(Conversation.init)
    }

    public func messages(_ query: MessageQuery) throws(WeftError) -> [Message] {
        let unsent = try unsentMessages()
        return try storeCall { try store.messages(query) }.map { Message($0, localUser: localUser, unsent: unsent.contains($0.id)) }
    }

    public func count(_ query: ConversationQuery) throws(WeftError) -> Int { try storeCall { try store.count(query) } }
    public func count(_ query: MessageQuery) throws(WeftError) -> Int { try storeCall { try store.count(query) } }

    /// The object named by a `weft:///` URL as soon as it exists, or `timedOut`.
    public func waitForObject(_ url: URL, timeout: Duration) async throws(WeftError) -> ObjectChange.Object {
        let identifier = try WeftIdentifier(url: url)
        let (stream, id) = subscribe()
        defer { unsubscribe(id) }
        if let found = try lookUp(identifier) { return found }
        let deadline = ContinuousClock.now + timeout
        let found: ObjectChange.Object? = await withTaskGroup(of: ObjectChange.Object?.self) { group in
            group.addTask {
                for await _ in stream {
                    if let found = try? await self.lookUp(identifier) { return found }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(until: deadline)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if let found { return found }
        // A change may have landed between the last check and the deadline.
        if let found = try lookUp(identifier) { return found }
        throw .timedOut(identifier.description)
    }

    private func lookUp(_ identifier: WeftIdentifier) throws(WeftError) -> ObjectChange.Object? {
        switch identifier {
        case .conversation(let id): try conversation(id).map(ObjectChange.Object.conversation)
        case .message(let id): try message(id).map(ObjectChange.Object.message)
        }
    }

    // MARK: - Changes

    /// A new stream of change batches, from now on.
    public func changes() -> AsyncStream<[ObjectChange]> { subscribe().0 }

    func subscribe() -> (AsyncStream<[ObjectChange]>, UUID) {
        let id = UUID()
        let (stream, continuation) = AsyncStream.makeStream(of: [ObjectChange].self, bufferingPolicy: .unbounded)
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in Task { await self?.unsubscribe(id) } }
        return (stream, id)
    }

    func unsubscribe(_ id: UUID) { subscribers.removeValue(forKey: id)?.finish() }

    private func publish(_ changes: ChangeSet) {
        guard !changes.isEmpty else { return }
        let unsent = (try? unsentMessages()) ?? []
        var batch: [ObjectChange] = []
        for change in changes.conversations {
            let object: ObjectChange.Object =
                change.snapshot.map { .conversation(Conversation($0)) } ?? .deleted(.conversation(change.id))
            batch.append(ObjectChange(object: object, kind: change.kind, property: change.property, oldValue: change.oldValue, newValue: change.newValue))
        }
        for change in changes.messages {
            let object: ObjectChange.Object =
                change.snapshot.map { .message(Message($0, localUser: localUser, unsent: unsent.contains($0.id))) }
                ?? .deleted(.message(change.id))
            batch.append(ObjectChange(object: object, kind: change.kind, property: change.property, oldValue: change.oldValue, newValue: change.newValue))
        }
        publish(batch)
    }

    private func publish(_ batch: [ObjectChange]) {
        for continuation in subscribers.values { continuation.yield(batch) }
    }

    // MARK: - Writing

    /// Writes to the canonical conversation's log, after checking the local user takes part.
    private func write(_ body: OperationBody, in conversation: ConversationID) throws(WeftError) {
        try write(body, inLog: participating(conversation))
    }

    private func write(_ body: OperationBody, inLog log: ConversationID) throws(WeftError) {
        let now = wallClock()
        try commit { author, replica in [author.write(body, in: log, replica: replica, wallMilliseconds: now)] }
    }

    /// Membership changes and watermarks go to every log of a merge group where the local user
    /// takes part, so they hold for the whole merged conversation (SPEC §13.3).
    private func writeToGroup(_ body: OperationBody, _ conversation: ConversationID) throws(WeftError) {
        let canonical = try participating(conversation)
        let logs = [canonical] + (try self.conversation(canonical)!.mergedIdentifiers)
        let now = wallClock()
        try commit { author, replica in
            logs.map { author.write(body, in: $0, replica: replica, wallMilliseconds: now) }
        }
    }

    /// The canonical conversation, if the local user is a participant of it.
    private func participating(_ conversation: ConversationID) throws(WeftError) -> ConversationID {
        guard let found = try self.conversation(conversation) else { throw .unknownConversation(conversation.hex) }
        guard found.participants.contains(localUser) else { throw .notAParticipant }
        return found.id
    }

    /// The log a message was posted to (receipts and deletions must follow it there).
    private func postedTo(_ message: OperationID) throws(WeftError) -> ConversationID {
        guard let found = try storeCall({ try store.message(message) }) else { throw .unknownMessage(message.hex) }
        return found.postedTo
    }

    /// Refuses, before anything is signed, a body the protocol cannot carry: a text field over
    /// 65,535 bytes or an operation over `Operation.maxByteCount` (SPEC §12.1).
    private func checkLimits(_ body: OperationBody) throws(WeftError) {
        var texts: [String] = []
        switch body {
        case .createConversation(_, _, _, let metadata):
            texts = Array(metadata.keys) + Array(metadata.values)
        case .setMetadata(let entries):
            texts = Array(entries.keys) + entries.values.compactMap { $0 }
        case .postMessage(let parts, let options):
            texts = parts.map(\.mimeType) + [options.notificationText, options.notificationSound].compactMap { $0 }
        default:
            break
        }
        if let long = texts.first(where: { $0.utf8.count > Int(UInt16.max) }) {
            throw .tooLarge("a text field of \(long.utf8.count) bytes (the limit is 65,535)")
        }
        let probe = WeftModel.Operation(
            author: localUser, conversation: ConversationID(bytes: [UInt8](repeating: 0, count: ConversationID.byteCount))!,
            sequence: 1, timestamp: HLCTimestamp(rawValue: 0), causes: [], body: body)
        // Room for the causes a real operation names.
        let size = probe.encoded().count + 64 * OperationID.byteCount
        guard size <= WeftModel.Operation.maxByteCount else {
            throw .tooLarge("an operation of about \(size) bytes (the limit is \(WeftModel.Operation.maxByteCount))")
        }
    }

    /// Builds operations against the store's current replica and writes them (with outbox
    /// entries for messages) in one transaction, then tells subscribers what changed.
    @discardableResult
    private func commit(
        outbox: (([SignedOperation]) -> OutboxEntry)? = nil,
        _ build: (inout Author, Replica) -> [SignedOperation]
    ) throws(WeftError) -> [SignedOperation] {
        var author = self.author
        var built: [SignedOperation] = []
        let applied: Store.Applied
        do {
            applied = try store.commitLocal { replica in
                built = build(&author, replica)
                return Store.LocalBatch(operations: built, outbox: outbox.map { [$0(built)] } ?? [])
            }
        } catch {
            throw .storage("\(error)")
        }
        self.author = author
        publish(applied.changes)
        return built
    }

    /// Messages still waiting in the outbox (`Store.outbox()` lists only those).
    private func unsentMessages() throws(WeftError) -> Set<OperationID> {
        Set(try storeCall { try store.outbox() }.map(\.message))
    }

    private func wrap(_ snapshot: MessageSnapshot) throws(WeftError) -> Message {
        Message(snapshot, localUser: localUser, unsent: try unsentMessages().contains(snapshot.id))
    }

    private func storeCall<T>(_ body: () throws -> T) throws(WeftError) -> T {
        do {
            return try body()
        } catch {
            throw .storage("\(error)")
        }
    }
}
