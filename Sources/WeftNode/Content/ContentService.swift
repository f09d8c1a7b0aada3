import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import WeftCrypto
import WeftModel
import WeftStore
import WeftSync
import WeftTransfer

/// Rich content on one node (SPEC.md §11.2, §17): adds content users send, serves what the
/// node holds to peers, and fetches content parts of the messages it stores (and those asked
/// for), resuming after restarts.
///
/// The daemon makes one over its home's `ContentStore` and gives it to the `Replicator`, which
/// runs it beside replication: the replicator tells it of connections with peers that set the
/// *content* feature bit and hands it their content-transfer messages (§17.8); it writes to
/// those connections only.
///
/// Inside, one task owns the transfer scheduler (`TransferCore`, §17.7) and takes its events
/// from one bounded queue: connections, the messages peers answer with, chunks verified, the
/// timer, downloads wanted. Verifying and writing chunks, opening and completing content run on
/// NIO's thread pool (the content store blocks on the disk), a bounded number at a time, and
/// report back through the queue. Each connection has a server task that answers what the
/// peer asks (HOLDINGS, manifests, chunks), bounded per peer identity.
///
/// Chunks are compressed when served (`ChunkFrameEncoder`, one zstd context per pool thread,
/// reused), by whichever node serves them: frames are not stored. A relay thus compresses
/// again what it serves; the bytes on the wire are the same kind (§17.5).
public final class ContentService: Sendable {
    public let configuration: ContentConfiguration
    /// Where content is kept (the home's `content/`).
    public let contentStore: ContentStore
    let store: Store
    let logger: Logger

    let board: ContentBoard
    /// Content added here and not sent whole yet, kept across restarts as the board tells.
    let pendingUploads: PendingUploads
    let coders = ChunkCoders()
    let events: DriverQueue<ContentEvent>
    /// Room for chunks being verified and written.
    let verifying: JobSlots
    let budget: ContentServeBudget
    /// Each content-capable connection's server queue.
    let servers = Mutex<[ConnectionNumber: ContentServeQueue]>([:])
    /// Tasks to run in the service's task group (servers, jobs), made in `init` so that none
    /// is lost before `run` starts. Unbuffered in name only: the group takes each as it comes,
    /// and what yields here is itself bounded (a server per connection, a job per verification
    /// slot, an open per download under way).
    let spawnRequests: AsyncStream<@Sendable () async -> Void>
    let spawn: AsyncStream<@Sendable () async -> Void>.Continuation
    /// Descriptors of contents served, read from their manifests (bounded: cleared when full).
    let descriptors = Mutex<[ContentRoot: ContentDescriptor]>([:])
    /// MIME types of contents, as messages and callers gave them: whether a chunk is worth
    /// compressing (bounded: cleared when full; an unknown type is tried).
    let mimeTypes = Mutex<[ContentRoot: String]>([:])
    let counters = Mutex(ContentStatistics())
    /// Whether a retention pass runs (`removeUnreferenced`): one at a time.
    let isRemoving = Mutex(false)
    static let maxRemembered = 4_096

    /// - Parameters:
    ///   - store: the node's store, whose commits of messages with content parts start their
    ///     automatic download.
    ///   - contentStore: where the content goes.
    public init(
        store: Store, contentStore: ContentStore, configuration: ContentConfiguration = ContentConfiguration(),
        logger: Logger = Logger(label: "weft.content")
    ) {
        // The node's own configuration, not input: a programming error stops here.
        precondition(configuration.transfer.isValid, "invalid transfer configuration")
        self.store = store
        self.contentStore = contentStore
        self.configuration = configuration
        self.logger = logger
        let pendingUploads = PendingUploads(directory: contentStore.directory, logger: logger)
        self.pendingUploads = pendingUploads
        board = ContentBoard(onSentWhole: { pendingUploads.sentWhole($0) })
        // A removal left queued when the service stops still answers whoever waits for it.
        events = DriverQueue(capacity: configuration.maxQueuedEvents) { event in
            switch event {
            case .remove(let removal): removal.answer(removed: [])
            case .removed(let removal, _, let removed): removal.answer(removed: removed)
            default: break
            }
        }
        verifying = JobSlots(configuration.maxChunksVerifying)
        budget = ContentServeBudget(
            maxChunks: configuration.maxQueuedChunksPerPeer, maxManifests: configuration.maxQueuedManifestsPerPeer)
        (spawnRequests, spawn) = AsyncStream<@Sendable () async -> Void>.makeStream()
    }

    // MARK: - Status and progress

    /// Where the content stands here.
    public func status(of root: ContentRoot) -> ContentTransferStatus {
        if let status = board.status(of: root) { return status }
        return contentFile(root) != nil ? .complete : .readyForDownload
    }

    /// The content's progress as it stands, if it is being transferred (or was, since the
    /// node started); nil otherwise.
    public func currentProgress(of root: ContentRoot) -> ContentProgress? { board.progress(of: root) }

    /// The content's progress: what is known now, then each change, until it is complete (the
    /// last value's fraction is then exactly 1) or failed. Verified bytes never go backwards.
    public func progress(of root: ContentRoot) -> AsyncStream<ContentProgress> {
        if board.status(of: root) == nil, let file = contentFile(root) {
            let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int).map(UInt64.init) ?? 0
            return board.watch(root, initial: ContentProgress(verifiedBytes: size, totalBytes: size), isOver: true)
        }
        return board.watch(root, initial: nil, isOver: false)
    }

    /// The file of complete content (read-only; copy it out), or nil if it is not held whole.
    public func contentFile(_ root: ContentRoot) -> URL? {
        guard let storeRoot = try? ContentStore.Root(root.bytes) else { return nil }
        return contentStore.completeFile(of: storeRoot)
    }

    /// Fetches the content (on demand): it is fetched while the node runs, and after a
    /// restart, until it is complete (its journal's header is written first, so a restart
    /// wants it again even if it was still waiting for other downloads). `mimeType` is the
    /// part's (only whether to compress it when serving it on depends on it). Returns once the
    /// want is queued.
    public func download(_ descriptor: ContentDescriptor, mimeType: String? = nil) async {
        do {
            try await blocking {
                try self.contentStore.reserve(try ContentStore.Root(descriptor.root.bytes), layout: try Self.layout(of: descriptor))
            }
        } catch {
            // Fetched all the same while the node runs; only a restart would not know of it.
            if !(error is CancellationError) { logger.warning("cannot keep the want of content \(descriptor.root): \(error)") }
        }
        await events.send(.want(descriptor, mimeType: mimeType))
    }

    /// Counters for tests and figures.
    public var statistics: ContentStatistics { counters.withLock { $0 } }

    // MARK: - Running

    /// Runs the service until the replicator stops: the download driver, its timer, the
    /// servers of connections, the automatic downloads of stored messages. First removes
    /// content no held message refers to, then resumes partial content and wants what stored
    /// messages name and the node lacks (`catchUp`).
    /// - Parameter changes: the store's commits, subscribed to before anything of the node
    ///   runs, so that no message stored is missed.
    func run(changes: ChangeStream) async {
        // Before any server runs: a chunk served before the board knows its upload would
        // never count, and the upload never be complete.
        await resumeUploads()
        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                group.addTask {
                    await withDiscardingTaskGroup { tasks in
                        for await task in self.spawnRequests { tasks.addTask(operation: task) }
                    }
                }
                group.addTask { await self.drive() }
                group.addTask { await self.watchMessages(changes) }
                group.addTask {
                    while !Task.isCancelled {
                        do { try await Task.sleep(for: self.configuration.tickInterval) } catch { return }
                        await self.events.send(.tick)
                    }
                }
                group.addTask { await self.catchUp() }
            }
        } onCancel: {
            stop()
        }
        // Whatever the cancellation: partial content is flushed, so its progress survives.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            NIOThreadPool.singleton.submit { _ in
                do {
                    try self.contentStore.closeAll()
                } catch {
                    self.logger.error("cannot flush partial content on stopping: \(error)")
                }
                // What was sent whole last is on the disk before the node says it stopped.
                self.pendingUploads.applyRecorded()
                continuation.resume()
            }
        }
    }

    /// Ends the driver, the servers, the jobs waiting to start and the progress watched (the
    /// node stopped).
    private func stop() {
        board.close()
        events.close()
        verifying.close()
        spawn.finish()
        for server in servers.withLock({ Array($0.values) }) { server.close() }
    }

    /// Runs `body` on NIO's thread pool: the content store blocks on the disk.
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(body)
    }

    /// Wants again every partial content the store holds (transfers a restart cut short).
    func resumePartials() async {
        do {
            let wanted = try await blocking { () -> [ContentDescriptor] in
                try self.contentStore.removeStaleImports()
                var wanted: [ContentDescriptor] = []
                for (root, holding) in try self.contentStore.roots() where holding == .partial {
                    guard let layout = try self.contentStore.journalLayout(of: root), let contentRoot = ContentRoot(bytes: root.bytes),
                        let descriptor = try? ContentDescriptor(byteCount: layout.totalSize, chunkLog: layout.chunkLog, root: contentRoot)
                    else { continue }
                    wanted.append(descriptor)
                }
                return wanted
            }
            if !wanted.isEmpty { logger.info("resuming \(wanted.count) content download(s)") }
            for descriptor in wanted { await events.send(.want(descriptor, mimeType: nil)) }
        } catch {
            logger.error("cannot list the content to resume: \(error)")
        }
    }

    /// Tells the board of the content added before a restart and not sent whole yet (awaiting
    /// upload again); forgets the marks of content no longer held whole.
    private func resumeUploads() async {
        let marked: [(root: ContentRoot, isHeld: Bool)]
        do {
            marked = try await blocking { try self.pendingUploads.roots().map { ($0, self.contentFile($0) != nil) } }
        } catch {
            if !(error is CancellationError) { logger.error("cannot list the content awaiting upload: \(error)") }
            return
        }
        var resumed = 0
        for (root, isHeld) in marked {
            if isHeld, let descriptor = await descriptor(of: root) {
                board.added(descriptor)
                resumed += 1
            } else {
                pendingUploads.forget(root)
            }
        }
        if resumed > 0 { logger.info("\(resumed) content(s) added here await upload") }
    }

    // MARK: - Automatic downloads

    /// Wants the content parts of the messages the store commits, as the configuration says.
    private func watchMessages(_ changes: ChangeStream) async {
        for await batch in changes {
            for signed in batch.storedOperations {
                guard case .postMessage(let parts, _) = signed.operation.body else { continue }
                for part in parts {
                    guard let descriptor = part.content else { continue }
                    if await shouldFetch(descriptor, mimeType: part.mimeType, in: signed.operation.conversation) {
                        await events.send(.want(descriptor, mimeType: part.mimeType))
                    }
                }
            }
        }
    }

    /// Whether a content part of a message stored in `conversation` is fetched without being
    /// asked for: small enough, of a MIME type fetched automatically, or in a conversation
    /// whose every part the node takes (see `ContentConfiguration`).
    func shouldFetch(_ descriptor: ContentDescriptor, mimeType: String, in conversation: ConversationID) async -> Bool {
        if descriptor.byteCount <= configuration.automaticDownloadLimit { return true }
        if configuration.automaticDownloadTypes.contains(where: { $0.matches(mimeType) }) { return true }
        let participant = configuration.downloadsParticipantContent
        let relayed = configuration.keepsRelayedContent
        if participant == relayed { return participant }
        do {
            let isParticipant = try await store.fetchMembership(of: store.localUser, in: conversation)?.isParticipant ?? false
            return isParticipant ? participant : relayed
        } catch {
            logger.error("cannot tell whether the local user takes part in conversation \(conversation): \(error)")
            return false
        }
    }

    // MARK: - The replicator's side

    /// A peer with the *content* bit is authenticated on a connection: its server starts,
    /// and the driver may ask it for content.
    func connected(_ link: ContentLink) async {
        let queue = ContentServeQueue(
            link: link, budget: budget, maxHoldings: configuration.maxQueuedHoldingsPerPeer,
            maxInterests: configuration.maxInterestsPerPeer)
        servers.withLock { $0[link.number] = queue }
        spawn.yield { await self.serve(queue) }
        await events.send(.connected(link))
    }

    /// The connection ended (or was replaced).
    func disconnected(_ link: ContentLink) async {
        servers.withLock { $0.removeValue(forKey: link.number) }?.close()
        await events.send(.disconnected(link))
    }

    /// A content-transfer message arrived on a connection: requests go to its server (dropped
    /// past the peer's bounds), answers and chunks to the driver, waiting for room (so the
    /// connections are read no faster than chunks are verified).
    func received(_ message: ContentTransferMessage, on link: ContentLink) async {
        switch message {
        case .holdingsRequest(let root):
            guard let server = servers.withLock({ $0[link.number] }) else { return }
            if !server.askHoldings(root) { counters.withLock { $0.requestsDropped += 1 } }
        case .manifestRequest(let root):
            guard let server = servers.withLock({ $0[link.number] }) else { return }
            if !server.askManifest(root) {
                counters.withLock { $0.requestsDropped += 1 }
                logger.debug("dropped a manifest request from \(link.identity): it has \(configuration.maxQueuedManifestsPerPeer) waiting")
            }
        case .chunkRequest(let root, let chunks):
            guard let server = servers.withLock({ $0[link.number] }) else { return }
            let dropped = server.askChunks(chunks, of: root)
            if dropped > 0 {
                counters.withLock { $0.requestsDropped += dropped }
                logger.debug("dropped \(dropped) chunk request(s) from \(link.identity): it has \(configuration.maxQueuedChunksPerPeer) waiting")
            }
        case .cancel(let root, let chunks):
            servers.withLock { $0[link.number] }?.cancel(chunks, of: root)
        case .chunk:
            // Waits for room to verify it: the connections are read no faster than that.
            await verifying.acquire()
            if !(await events.send(.received(link, message))) { verifying.release() }
        case .holdings, .manifest, .notHeld:
            await events.send(.received(link, message))
        }
    }

    /// Tells each connection that asked about `root` what this node holds of it now.
    func holdMore(of root: ContentRoot, isComplete: Bool) {
        for server in servers.withLock({ Array($0.values) }) { server.holdMore(of: root, isComplete: isComplete) }
    }

    func remember(mimeType: String?, of root: ContentRoot) {
        guard let mimeType else { return }
        mimeTypes.withLock { types in
            if types.count >= Self.maxRemembered, types[root] == nil { types.removeAll() }
            types[root] = mimeType
        }
    }
}

/// Counters of a node's content service.
public struct ContentStatistics: Sendable, Hashable {
    /// Chunks sent to peers.
    public var chunksServed = 0
    /// Chunks that arrived for a content being fetched.
    public var chunksReceived = 0
    /// Chunks verified and written.
    public var chunksVerified = 0
    /// Chunks that failed §17.6's checks.
    public var corruptChunks = 0
    /// Chunks that arrived for no content being fetched (dropped).
    public var chunksIgnored = 0
    /// Manifests sent to peers.
    public var manifestsServed = 0
    /// Chunks encoded (compressed, or found not worth it) to serve them, because no frame was
    /// kept: a node that added the content encodes each chunk the first time it serves it and
    /// keeps that frame; a node that received the content kept every frame as it arrived and
    /// encodes none (but for a frame a crash tore).
    public var framesEncoded = 0
    /// Requests of peers dropped past their bounds.
    public var requestsDropped = 0
    /// Contents completed by download.
    public var downloadsCompleted = 0

    public init() {}
}

/// What the download driver handles, in order.
enum ContentEvent: Sendable {
    case want(ContentDescriptor, mimeType: String?)
    case imported(ContentDescriptor)
    case connected(ContentLink)
    case disconnected(ContentLink)
    /// HOLDINGS, MANIFEST, CHUNK (holding a verification slot) or NOT HELD from a peer.
    case received(ContentLink, ContentTransferMessage)
    case opened(ContentRoot, OpenOutcome)
    case manifestSaved(ContentRoot, ContentManifest, failure: String?)
    case chunkChecked(ContentLink, ContentRoot, chunk: Int, ChunkOutcome)
    case finished(ContentRoot, CompletionOutcome)
    case tick
    /// Retention: stop fetching these contents, then remove them (`ContentDriver+Removal.swift`).
    case remove(ContentRemoval)
    /// The removal's job is done: the roots it was given (`targets`) and those it removed.
    case removed(ContentRemoval, targets: [ContentRoot], removed: [ContentRoot])

    enum OpenOutcome: Sendable {
        case complete
        case partial(PartialContent, manifest: ContentManifest?, heldBytes: UInt64, verified: TransferChunkSet)
        case diskFull(String)
        case failed(String)
    }

    enum ChunkOutcome: Sendable {
        case written(heldBytes: UInt64)
        case duplicate
        /// A bad hash (§17.6 check 6): counted against the peer.
        case corrupt(String)
        /// A frame no honest encoder makes (§17.6 checks 3–5): the connection is closed.
        case violation(String)
        case diskFull(String)
        /// The partial content closed meanwhile (completed, cancelled).
        case closed
        case failed(String)
    }

    enum CompletionOutcome: Sendable {
        case complete
        case incomplete(TransferChunkSet)
        case diskFull(String)
        case failed(String)
    }
}
