import NIOCore
import WeftCrypto
import WeftModel

/// What a node does for each control request (SPEC.md §15.4): the daemon implements it over
/// its client and store; `respond(to:)` turns a request into its response, so a server only
/// moves frames. Refusals throw a `ControlFailure` with its code and one sentence.
public protocol ControlHandler: Sendable {
    func status() async throws(ControlFailure) -> NodeStatus
    func peers() async throws(ControlFailure) -> [PeerRecord]
    func users() async throws(ControlFailure) -> [KnownUser]
    func createConversation(_ request: ControlRequest.CreateConversation) async throws(ControlFailure) -> ConversationRecord
    func addParticipants(_ users: [UserID], to conversation: ConversationID) async throws(ControlFailure)
    func removeParticipants(_ users: [UserID], from conversation: ConversationID) async throws(ControlFailure)
    /// Removes the local user from the conversation.
    func leave(_ conversation: ConversationID) async throws(ControlFailure)
    /// The number of conversations shown, and up to `limit` of them from `offset`, oldest first.
    func conversations(offset: Int, limit: Int) async throws(ControlFailure) -> (total: Int, [ConversationRecord])
    func conversation(_ id: ConversationID) async throws(ControlFailure) -> ConversationRecord
    func send(_ parts: [ControlRequest.Part], in conversation: ConversationID) async throws(ControlFailure) -> OperationID
    /// Each message as `send` would send it, in order, a refusal of one leaving the others;
    /// what became of each, in order.
    func sendBatch(_ messages: [ControlRequest.Outgoing]) async -> [ControlResponse.SendOutcome]
    /// Sends a message whose file parts the node reads itself; large ones become rich content.
    func sendFiles(_ parts: [ControlRequest.FilePart], in conversation: ConversationID) async throws(ControlFailure) -> OperationID
    /// The conversation's message count, and up to `limit` messages from position `offset`.
    func messages(in conversation: ConversationID, offset: Int, limit: Int) async throws(ControlFailure) -> (total: Int, [MessageRecord])
    func markRead(_ message: OperationID) async throws(ControlFailure)
    func markAllRead(in conversation: ConversationID) async throws(ControlFailure)
    /// Returns once the object exists on this node; throws `timedOut` after `timeout`.
    func waitForObject(_ object: ControlObjectID, timeout: Duration) async throws(ControlFailure) -> ControlObjectID
    /// Hands every change and delivery event from now on to `emit`, waiting for each (so a slow
    /// watcher slows only its own stream, whose store subscription drops the oldest batches and
    /// reports them as `missed`); returns when `emit` throws or the task is cancelled. With
    /// `messages`, each new message's record follows the event of its creation.
    func watch(messages: Bool, _ emit: @escaping @Sendable (ControlEvent) async throws -> Void) async throws
    /// Fetches part `part` of `message` (copying it to `path` unless empty), handing `emit`
    /// the progress as it changes; returns once the part is whole here (and copied), throws
    /// why it cannot be.
    func download(
        _ message: OperationID, part: Int, to path: String, _ emit: @escaping @Sendable (DownloadProgress) async throws -> Void
    ) async throws
    /// The replication counters since the node started.
    func statistics() async throws(ControlFailure) -> [ReplicationCounter]
    /// Dials `address` (`host:port`) and keeps dialing it; a text that is not one is
    /// `invalidArgument`.
    func connect(to address: String) async throws(ControlFailure)
    func disconnect(from address: String) async throws(ControlFailure)
    /// Closes the link to `peer` and refuses it until `heal(_:)`.
    func cut(_ peer: UserID) async throws(ControlFailure)
    /// Accepts a cut peer again; dialers of its address dial at once.
    func heal(_ peer: UserID) async throws(ControlFailure)
}

extension ControlHandler {
    /// Room in one frame for a page's records.
    static var pageByteBudget: Int { ControlConstants.maxFrameByteCount - ControlConstants.headerByteCount - 8 }
    /// Records asked of the handler for one page; the page holds fewer when they do not fit.
    static var pageLimit: Int { 256 }

    /// Carries out one request other than WATCH (the server streams `events()` for that).
    public func respond(to request: ControlRequest) async -> ControlResponse {
        do {
            return try await carryOut(request)
        } catch {
            return .error(error)
        }
    }

    private func carryOut(_ request: ControlRequest) async throws(ControlFailure) -> ControlResponse {
        switch request {
        case .ping(let value): return .pong(value)
        case .status: return .status(try await status())
        case .peers: return .peers(try await peers())
        case .users: return .users(try await users())
        case .createConversation(let create): return .conversation(try await createConversation(create))
        case .addParticipants(let users, let conversation):
            try await addParticipants(users, to: conversation)
            return .done
        case .removeParticipants(let users, let conversation):
            try await removeParticipants(users, from: conversation)
            return .done
        case .leave(let conversation):
            try await leave(conversation)
            return .done
        case .conversations(let offset):
            let (total, records) = try await conversations(offset: Int(offset), limit: Self.pageLimit)
            return .conversations(total: UInt32(clamping: total), try Self.fitting(records) { $0.write(into: &$1) })
        case .conversation(let id): return .conversation(try await conversation(id))
        case .send(let parts, let conversation): return .sent(try await send(parts, in: conversation))
        case .sendBatch(let messages): return .sentBatch(await sendBatch(messages))
        case .sendFiles(let parts, let conversation): return .sent(try await sendFiles(parts, in: conversation))
        case .messages(let conversation, let offset):
            let (total, records) = try await messages(in: conversation, offset: Int(offset), limit: Self.pageLimit)
            return .messages(total: UInt32(clamping: total), try Self.fitting(records) { $0.write(into: &$1) })
        case .markRead(let message):
            try await markRead(message)
            return .done
        case .markAllRead(let conversation):
            try await markAllRead(in: conversation)
            return .done
        case .wait(let object, let timeout):
            return .found(try await waitForObject(object, timeout: .milliseconds(Int64(timeout))))
        case .statistics: return .statistics(try await statistics())
        case .connect(let address):
            try await connect(to: address)
            return .done
        case .disconnect(let address):
            try await disconnect(from: address)
            return .done
        case .cut(let peer):
            try await cut(peer)
            return .done
        case .heal(let peer):
            try await heal(peer)
            return .done
        case .watch, .download:
            // Streamed by the server itself (ControlServer.answer), never handed here.
            preconditionFailure("the server streams WATCH and DOWNLOAD itself")
        }
    }

    /// The longest prefix of `records` that fits one frame; the client asks for the rest from
    /// where the page ends. A single record too large for a frame is refused.
    static func fitting<R>(_ records: [R], _ write: (R, inout ByteBuffer) -> Void) throws(ControlFailure) -> [R] {
        var used = 0
        var scratch = ByteBuffer()
        for (index, record) in records.enumerated() {
            scratch.clear()
            write(record, &scratch)
            used += scratch.readableBytes
            if used > pageByteBudget {
                guard index > 0 else { throw ControlFailure(.tooLarge, "The record is too large for one control frame.") }
                return Array(records.prefix(index))
            }
        }
        return records
    }
}

/// What the replicator knows that the control API shows: per-conversation and total operations
/// not yet synced, operations held, what each peer holds. A node without replication has none
/// (`ControlHandler`s then report these as unknown).
public protocol ReplicationReport: Sendable {
    /// Operations known to exist on a peer and not yet held, in one conversation's logs.
    func unsyncedOperations(in conversation: ConversationID) async -> UInt64
    /// The same, over all logs.
    func unsyncedOperations() async -> UInt64
    /// Operations held, over all logs.
    func heldOperations() async -> UInt64
    /// What a connected peer is known to hold; nil if nothing is known yet.
    func holdings(of peer: UserID) async -> PeerHoldings?
    /// The replication counters since the node started.
    func statistics() async -> [ReplicationCounter]
}
