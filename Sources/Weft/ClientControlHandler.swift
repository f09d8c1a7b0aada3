import Foundation
import Synchronization
import WeftControl
import WeftCrypto
import WeftModel
import WeftNode
import WeftStore

/// The daemon's answers to control requests (SPEC.md §15.4), over its `WeftClient`, the
/// node's `PeerDirectory`, the `MeshNode` whose links CONNECT, CUT and HEAL change, and, once
/// replication runs, a `ReplicationReport`.
public final class ClientControlHandler: ControlHandler {
    /// What `status` reports that the handler does not look up.
    public struct Settings: Sendable {
        public var displayName: String
        public var timeToLive: Duration
        public var retentionDays: Int
        /// Milliseconds since 1970.
        public var startedAt: UInt64

        public init(displayName: String, timeToLive: Duration, retentionDays: Int, startedAt: UInt64) {
            self.displayName = displayName
            self.timeToLive = timeToLive
            self.retentionDays = retentionDays
            self.startedAt = startedAt
        }
    }

    public let client: WeftClient
    private let directory: PeerDirectory
    private let replication: (any ReplicationReport)?
    private let node: MeshNode?
    private let discovery: LANDiscovery?
    private let settings: Settings
    private let listenAddress = Mutex("")
    /// Where CONNECT's addresses are kept across restarts; nil: not kept.
    private let rememberedPeers: RememberedPeers?
    /// The node's rich content (downloads, transfer states); nil: it transfers none.
    private let content: (any ContentDownloads)?

    /// - Parameter node: the mesh node whose links the link requests change; without one they
    ///   are refused as not supported.
    public init(
        client: WeftClient, directory: PeerDirectory, settings: Settings, node: MeshNode? = nil,
        replication: (any ReplicationReport)? = nil, discovery: LANDiscovery? = nil, rememberedPeers: RememberedPeers? = nil,
        content: (any ContentDownloads)? = nil
    ) {
        self.rememberedPeers = rememberedPeers
        self.content = content
        self.client = client
        self.directory = directory
        self.settings = settings
        self.node = node
        self.replication = replication
        self.discovery = discovery
    }

    /// Records where the mesh listener is bound, for `status`.
    public func listening(at address: String) { listenAddress.withLock { $0 = address } }

    // MARK: - The node

    public func status() async throws(ControlFailure) -> NodeStatus {
        let conversations = try await call { () async throws(WeftError) in try await client.count(ConversationQuery()) }
        let unsent: Int
        do {
            unsent = try await client.store.fetchOutbox().count
        } catch {
            throw ControlFailure(.storageFailed, "The store failed: \(error).")
        }
        return NodeStatus(
            user: client.localUser, displayName: settings.displayName, listenAddress: listenAddress.withLock { $0 },
            startedAt: settings.startedAt, connectedPeers: UInt32(clamping: Set(directory.connections.map(\.info.identity)).count),
            conversations: UInt32(clamping: conversations), unsentMessages: UInt32(clamping: unsent),
            timeToLiveSeconds: UInt32(clamping: settings.timeToLive.components.seconds),
            retentionDays: UInt32(clamping: settings.retentionDays), isReplicating: replication != nil,
            heldOperations: await replication?.heldOperations(), unsyncedOperations: await replication?.unsyncedOperations(),
            discovery: discovery != nil, discoveryInterfaces: discovery?.interfaces.map(\.name) ?? [])
    }

    public func peers() async throws(ControlFailure) -> [PeerRecord] {
        var records: [PeerRecord] = []
        // How each connection came about, as the mesh node knows it (without one: by direction).
        let origins = Dictionary((node?.peers ?? []).map { ($0.info.identity, $0.origin) }, uniquingKeysWith: { first, _ in first })
        for connection in directory.connections {
            let origin: PeerRecord.Origin =
                switch origins[connection.info.identity] {
                case .configured?: .staticAddress
                case .added?: .added
                case .discovered?: .discovered
                case .inbound?: .inbound
                case nil: connection.direction == .outbound ? .staticAddress : .inbound
                }
            records.append(PeerRecord(
                user: connection.info.identity, displayName: connection.info.displayName, address: connection.address,
                origin: origin, connectedAt: connection.since,
                holdings: await replication?.holdings(of: connection.info.identity)))
        }
        return records
    }

    public func users() async throws(ControlFailure) -> [KnownUser] { directory.knownUsers }

    // MARK: - Conversations

    public func createConversation(_ request: ControlRequest.CreateConversation) async throws(ControlFailure) -> ConversationRecord {
        let options = ConversationOptions(distinct: request.distinct, metadata: request.metadata, announce: request.announce)
        let created = try await call { () async throws(WeftError) in try await client.createConversation(with: Set(request.participants), options: options) }
        return await record(created)
    }

    public func addParticipants(_ users: [UserID], to conversation: ConversationID) async throws(ControlFailure) {
        try await call { () async throws(WeftError) in try await client.addParticipants(Set(users), to: conversation) }
    }

    public func removeParticipants(_ users: [UserID], from conversation: ConversationID) async throws(ControlFailure) {
        try await call { () async throws(WeftError) in try await client.removeParticipants(Set(users), from: conversation) }
    }

    public func leave(_ conversation: ConversationID) async throws(ControlFailure) {
        try await removeParticipants([client.localUser], from: conversation)
    }

    public func conversations(offset: Int, limit: Int) async throws(ControlFailure) -> (total: Int, [ConversationRecord]) {
        let total = try await call { () async throws(WeftError) in try await client.count(ConversationQuery()) }
        let page = try await call { () async throws(WeftError) in
            try await client.conversations(ConversationQuery(sort: [ConversationSort(.createdAt)], limit: limit, offset: offset))
        }
        var records: [ConversationRecord] = []
        for conversation in page { records.append(await record(conversation)) }
        return (total, records)
    }

    public func conversation(_ id: ConversationID) async throws(ControlFailure) -> ConversationRecord {
        await record(try await existing(id))
    }

    // MARK: - Messages

    public func send(_ parts: [ControlRequest.Part], in conversation: ConversationID) async throws(ControlFailure) -> OperationID {
        let message = try await call { () async throws(WeftError) in
            try await client.send(parts.map { MessagePart(mimeType: $0.mimeType, data: $0.data) }, in: conversation)
        }
        return message.id
    }

    public func sendFiles(_ parts: [ControlRequest.FilePart], in conversation: ConversationID) async throws(ControlFailure) -> OperationID {
        let message = try await call { () async throws(WeftError) in
            var messageParts: [MessagePart] = []
            for part in parts {
                switch part.source {
                case .data(let data): messageParts.append(MessagePart(mimeType: part.mimeType, data: data))
                case .file(let path): messageParts.append(try await client.part(fromFile: URL(fileURLWithPath: path), mimeType: part.mimeType))
                }
            }
            return try await client.send(messageParts, in: conversation)
        }
        return message.id
    }

    public func sendBatch(_ messages: [ControlRequest.Outgoing]) async -> [ControlResponse.SendOutcome] {
        let outgoing = messages.map { message in
            WeftClient.OutgoingMessage(message.parts.map { MessagePart(mimeType: $0.mimeType, data: $0.data) }, in: message.conversation)
        }
        return await client.send(outgoing).map { result in
            switch result {
            case .success(let message): .sent(message.id)
            case .failure(let error): .refused(ControlFailure(error))
            }
        }
    }

    public func messages(in conversation: ConversationID, offset: Int, limit: Int) async throws(ControlFailure) -> (total: Int, [MessageRecord]) {
        // The conversation's row counts its messages: counting them again cost a scan of the
        // conversation per page.
        let found = try await existing(conversation)
        let predicates = [MessagePredicate(.conversation, .equal, .conversation(found.id))]
        let total = found.totalMessageCount
        let page = try await call { () async throws(WeftError) in
            try await client.messages(MessageQuery(predicates, sort: [MessageSort(.position)], limit: limit, offset: offset))
        }
        return (total, page.map { record(of: $0) })
    }

    /// A message as the control protocol shows it, with where each rich-content part's
    /// transfer stands on this node.
    private func record(of message: Message) -> MessageRecord {
        let localUser = client.localUser
        var states: [ContentRoot: MessageRecord.ContentState] = [:]
        if let content {
            for part in message.parts {
                if let descriptor = part.content { states[descriptor.root] = content.state(of: descriptor, sentByLocalUser: message.sender == localUser) }
            }
        }
        return MessageRecord(message, localUser: localUser, content: states)
    }

    public func markRead(_ message: OperationID) async throws(ControlFailure) {
        try await call { () async throws(WeftError) in try await client.markAsRead(message) }
    }

    public func markAllRead(in conversation: ConversationID) async throws(ControlFailure) {
        try await call { () async throws(WeftError) in try await client.markAllMessagesAsRead(in: conversation) }
    }

    public func waitForObject(_ object: ControlObjectID, timeout: Duration) async throws(ControlFailure) -> ControlObjectID {
        let url =
            switch object {
            case .conversation(let id): WeftIdentifier.conversation(id).url
            case .message(let id): WeftIdentifier.message(id).url
            }
        let found = try await call { () async throws(WeftError) in try await client.waitForObject(url, timeout: timeout) }
        switch found {
        case .conversation(let conversation): return .conversation(conversation.id)
        case .message(let message): return .message(message.id)
        case .deleted: return object
        }
    }

    // MARK: - Watching

    public func watch(messages: Bool, _ emit: @escaping @Sendable (ControlEvent) async throws -> Void) async throws {
        // One subscription for both: each commit's changes, then the delivery events it holds
        // (`WeftClient.deliveryEvents()` derives them the same way, failures with their reason).
        let localUser = client.localUser
        for await batch in client.store.changes() {
            try Task.checkCancellation()
            if batch.missedBatches > 0 { try await emit(.missed(UInt32(clamping: batch.missedBatches))) }
            for change in ObjectChanges(batch, localUser: localUser) {
                for event in ControlEvent.events(for: change, messages: messages, localUser: localUser) { try await emit(event) }
            }
            for delivery in DeliveryEvent.events(in: batch, localUser: localUser) {
                for event in ControlEvent.events(for: delivery, recipients: batch) { try await emit(event) }
            }
        }
    }

    // MARK: - Downloads

    public func download(
        _ message: OperationID, part index: Int, to path: String, _ emit: @escaping @Sendable (DownloadProgress) async throws -> Void
    ) async throws {
        guard let found = try await call({ () async throws(WeftError) in try await client.message(message) }) else {
            throw ControlFailure(.unknownMessage, "There is no message \(message.hex) on this node.")
        }
        // The default: the first rich-content part, else the first part.
        let index = index == Int(ControlConstants.defaultPart) ? found.parts.firstIndex { $0.content != nil } ?? 0 : index
        guard found.parts.indices.contains(index) else {
            throw ControlFailure(.invalidArgument, "Message \(message.hex) has \(found.parts.count) part(s); there is no part \(index + 1).")
        }
        let part = found.parts[index]
        guard let descriptor = part.content else {
            // An inline part is here whole already.
            let data = try await call { () async throws(WeftError) in try await client.data(ofPart: index, in: message) }
            if !path.isEmpty { try Self.write(data, to: path) }
            let size = UInt64(data.count)
            try await emit(DownloadProgress(verifiedBytes: size, totalBytes: size, wireBytes: 0, bytesPerSecond: 0, status: .complete))
            return
        }
        guard let content else {
            throw ControlFailure(.notSupported, "This node does not transfer rich content; part \(index + 1) of message \(message.hex) is \(descriptor.byteCount) bytes of it.")
        }
        try await content.download(descriptor, mimeType: part.mimeType, to: path, emit)
    }

    /// `data` into the file at `path`, through a temporary file renamed over it.
    static func write(_ data: [UInt8], to path: String) throws(ControlFailure) {
        let target = URL(fileURLWithPath: path)
        let temporary = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).weft-download")
        do {
            try Data(data).write(to: temporary)
            guard rename(temporary.path, target.path) == 0 else {
                throw ControlFailure(.storageFailed, "Cannot write \(path): \(String(cString: strerror(errno))).")
            }
        } catch let failure as ControlFailure {
            try? FileManager.default.removeItem(at: temporary)
            throw failure
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw ControlFailure(.storageFailed, "Cannot write \(path): \(error.localizedDescription)")
        }
    }

    // MARK: - Replication and links

    public func statistics() async throws(ControlFailure) -> [ReplicationCounter] {
        guard let replication else { throw ControlFailure(.notSupported, "This node does not replicate.") }
        var counters = await replication.statistics()
        // NAMES entries dropped past a peer's bound (§14.12): the directory's, not the core's.
        counters.append(ReplicationCounter(name: "namesDropped", value: directory.namesDropped))
        // Rich content's (§17), when the node transfers it.
        counters += content?.counters ?? []
        if let packets = discovery?.statistics {
            // LAN discovery's packets (SPEC.md §16), when it runs.
            counters += [
                ("discoveryPacketsSent", packets.packetsSent), ("discoveryPacketsReceived", packets.packetsReceived),
                ("discoveryPacketsMalformed", packets.packetsRejected),
            ].map { ReplicationCounter(name: $0.0, value: UInt64(clamping: $0.1)) }
        }
        return counters
    }

    public func connect(to address: String) async throws(ControlFailure) {
        guard let peer = PeerAddress(address) else {
            throw ControlFailure(.invalidArgument, "\"\(address)\" is not host:port with a port from 0 to 65535.")
        }
        let node = try linkedNode()
        node.connect(to: peer)
        do {
            try rememberedPeers?.add(peer)
        } catch {
            throw ControlFailure(.storageFailed, "Dialing \(peer), but it will not be dialed after a restart: \(error)")
        }
    }

    public func disconnect(from address: String) async throws(ControlFailure) {
        guard let peer = PeerAddress(address) else {
            throw ControlFailure(.invalidArgument, "\"\(address)\" is not host:port with a port from 0 to 65535.")
        }
        let user = try linkedNode().disconnect(from: peer)
        do {
            try rememberedPeers?.remove(peer, user: user)
        } catch {
            throw ControlFailure(.storageFailed, "Disconnected from \(peer), but it may be dialed again after a restart: \(error)")
        }
    }

    public func cut(_ peer: UserID) async throws(ControlFailure) { try linkedNode().cut(peer) }

    public func heal(_ peer: UserID) async throws(ControlFailure) { try linkedNode().heal(peer) }

    private func linkedNode() throws(ControlFailure) -> MeshNode {
        guard let node else { throw ControlFailure(.notSupported, "This node has no mesh links to change.") }
        return node
    }

    // MARK: - Helpers

    private func existing(_ id: ConversationID) async throws(ControlFailure) -> Conversation {
        guard let found = try await call({ () async throws(WeftError) in try await client.conversation(id) }) else {
            throw ControlFailure(.unknownConversation, "There is no conversation \(id.hex) on this node.")
        }
        return found
    }

    private func record(_ conversation: Conversation) async -> ConversationRecord {
        ConversationRecord(conversation, unsyncedOperations: await replication?.unsyncedOperations(in: conversation.id))
    }

    /// Runs a client call; its `WeftError` becomes the matching control failure.
    private func call<T>(_ body: () async throws(WeftError) -> T) async throws(ControlFailure) -> T {
        do {
            return try await body()
        } catch {
            throw ControlFailure(error)
        }
    }
}
