import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import WeftCrypto
import WeftModel
import WeftStore
import WeftSync
import WeftWire

/// Replication for one node: drives the sans-I/O `SyncCore` with the node's connections, its
/// store's commits and a timer, and carries out what the core asks (SPEC.md §14).
///
/// One task owns the core (`drive`): every event reaches it through one bounded queue
/// (`SyncEventQueue`), and it carries out each event's actions in order before it takes the
/// next, as NIOSSHHandler drives its state machine from its event loop alone. The I/O sits
/// around it, at the edge: decoding DATA payloads, writing to each connection through one
/// writer task (`PeerOutbox`, whose fill tells the core when a peer stops keeping up),
/// storing received operations in batches (`UnstoredOperations`: one commit and one delivered
/// receipt per conversation per flush interval), reading a peer's missing operations from the
/// store, marking messages sent when a peer acknowledges them, and failing messages whose
/// time to live ran out. None of those tasks touches the core; they send it events.
///
/// Runs the `MeshNode` it was given (its only consumer of `events`) as a child task;
/// `run()` returns once the node stopped.
///
/// With a `PeerDirectory`, it records every node event there and carries the display names
/// peers tell each other (NAMES, §14.12): names are not replication state, so it handles them
/// itself and the core never sees them.
///
/// With a `ContentService`, it runs the service beside replication, tells it of connections
/// with peers that set the *content* feature bit, and hands it their content-transfer messages
/// (§17.8); the core never sees those either.
public final class Replicator: Service, Sendable {
    public let node: MeshNode
    public let localAuthor: LocalAuthor
    public let configuration: ReplicationConfiguration
    let logger: Logger
    /// Told of every node event, in order, before the replicator handles it.
    let observer: @Sendable (NodeEvent) -> Void
    /// Connections and names, kept from node events and NAMES; nil for a node that keeps none
    /// (it then never sends NAMES, and ignores any it gets).
    let directory: PeerDirectory?
    /// Rich content (§17.8): told of connections with peers that set the *content* bit, and
    /// handed their content-transfer messages; nil for a node that keeps no content (it then
    /// ignores any such message).
    public let content: ContentService?

    /// The core until `run()` hands it to its driver; nil after.
    let initialCore: Mutex<SyncCore?>
    /// The driver's events (`feed`) and questions (`inspect`).
    let queue: SyncEventQueue
    let links = Mutex(Links())
    let unstored: UnstoredOperations
    /// Received operations handed to the store whose commit the change stream has not shown
    /// yet: that commit is reported by the storer (with its source), not as a local one.
    let inFlight = Mutex(Set<OperationID>())
    /// Acknowledged operations waiting to be marked sent.
    let acknowledgements = Mutex(Acknowledgements())
    let clockOrigin = ContinuousClock.now
    /// When the last connection ended and whether memory was given back since, until the
    /// trims after it are done.
    let lastConnectionEnd = Mutex<(ended: ContinuousClock.Instant, trimmed: Bool)?>(nil)

    var store: Store { localAuthor.store }

    public init(
        node: MeshNode, localAuthor: LocalAuthor, configuration: ReplicationConfiguration = ReplicationConfiguration(),
        logger: Logger = Logger(label: "weft.replication"), directory: PeerDirectory? = nil, content: ContentService? = nil,
        observer: @escaping @Sendable (NodeEvent) -> Void = { _ in }
    ) throws {
        self.node = node
        self.directory = directory
        self.content = content
        self.localAuthor = localAuthor
        self.configuration = configuration
        self.logger = logger
        self.observer = observer
        self.unstored = UnstoredOperations(limit: configuration.maxUnstoredOperations)
        self.initialCore = Mutex(SyncCore(
            configuration: configuration.sync, localUser: localAuthor.localUser, summaries: try localAuthor.store.logSummaries(),
            memberships: try localAuthor.store.membershipFacts()))
        // Questions still waiting when the queue closes are answered with nil.
        self.queue = SyncEventQueue(capacity: configuration.maxQueuedEvents) { item in
            if case .inspect(let question) = item { question(nil) }
        }
    }

    /// Runs the node and replication until the node stops (graceful shutdown or cancellation).
    public func run() async throws {
        // Subscribed before anything runs, so no local commit goes unseen.
        // It reads only the summaries and stored operations, so commits need not read messages
        // back for it.
        let changes = store.changes(includingMessages: false)
        let (spawnRequests, spawn) = AsyncStream<@Sendable () async -> Void>.makeStream()
        links.withLock { $0.spawn = spawn }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                await withDiscardingTaskGroup { peers in
                    for await task in spawnRequests { peers.addTask(operation: task) }
                }
            }
            if let core = initialCore.withLock({ $0.take() }) { group.addTask { await self.drive(core) } }
            group.addTask { await self.consumeEvents() }
            if let content {
                let contentChanges = store.changes(includingMessages: false)
                group.addTask { await content.run(changes: contentChanges) }
            }
            group.addTask { await self.consumeCommits(changes) }
            group.addTask { await self.storeReceived() }
            group.addTask { await self.markAcknowledged() }
            group.addTask { await self.every(self.configuration.tickInterval) { await self.feed(.tick(nowMilliseconds: self.now)) } }
            group.addTask { await self.every(self.configuration.expiryInterval) { await self.expire() } }
            group.addTask { await self.every(self.configuration.pruneInterval) { await self.prune() } }
            group.addTask { await self.every(self.configuration.pendingSweepInterval) { await self.expirePending() } }
            // A child of the node's task group like the other timers: it ends when the node stops.
            group.addTask { await self.every(.seconds(1)) { self.trimAfterConnectionEnds() } }
            defer {
                // The node stopped: end every task (those waiting on a continuation, too).
                group.cancelAll()
                queue.close()
                spawn.finish()
                unstored.close()
                acknowledgements.withLock { $0.close() }
                links.withLock { links in
                    for outbox in links.outboxes.values { outbox.close() }
                    for jobs in links.jobs.values { jobs.finish() }
                }
            }
            try await node.run()
        }
    }

    /// Gives freed memory back to the system after a connection ends: SQLite's caches once,
    /// then the heap every second from `heapTrimDelay` after the last end until five times
    /// that (what a departed peer held is let go over a few seconds: its reads in flight
    /// finish, its channel's writes are dropped, the readers close).
    private func trimAfterConnectionEnds() {
        let (due, first) = lastConnectionEnd.withLock { state -> (Bool, Bool) in
            guard let (ended, trimmed) = state else { return (false, false) }
            let elapsed = ContinuousClock.now - ended
            guard elapsed >= configuration.heapTrimDelay else { return (false, false) }
            state = elapsed >= configuration.heapTrimDelay * 5 ? nil : (ended, true)
            return (true, !trimmed)
        }
        // SQLite's caches first (the reads a peer asked for filled them); their memory is
        // free once the readers close, for the next trims to return.
        if first { store.releaseMemoryEventually() }
        if due { HeapTrim.giveBack() }
    }

    /// Milliseconds since the replicator started, monotonic: the core's clock.
    var now: UInt64 {
        let elapsed = ContinuousClock.now - clockOrigin
        return UInt64(elapsed.components.seconds) * 1000 + UInt64(elapsed.components.attoseconds / 1_000_000_000_000_000)
    }

    private func every(_ interval: Duration, _ work: @Sendable () async -> Void) async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            await work()
        }
    }

    // MARK: - The core's driver

    /// The core's one owner: takes events from the queue, one at a time, and carries out each
    /// one's actions in order (and the events those raise) before the next. Returns once the
    /// queue is closed.
    func drive(_ core: consuming SyncCore) async {
        var core = core
        while let item = await queue.next() {
            switch item {
            case .event(let event):
                var events = [event]
                while !events.isEmpty {
                    let next = events.removeFirst()
                    events += perform(core.handle(next))
                }
            case .inspect(let question):
                question(core)
            }
        }
    }

    /// Hands an event to the core's driver, waiting while its queue is full (the node stopped:
    /// dropped).
    func feed(_ event: SyncEvent) async {
        await queue.send(.event(event))
    }

    /// Asks the core a question between two events. Nil once the node has stopped.
    func inspect<T: Sendable>(_ question: @escaping @Sendable (SyncCore) -> T) async -> T? {
        let answer = InspectionAnswer<T>()
        guard await queue.send(.inspect { core in answer.give(core.map(question)) }) else { return nil }
        return await answer.value()
    }


    // MARK: - Node events

    private func consumeEvents() async {
        // Each connection's incoming compressed stream (§14.11), begun with the connection.
        var streams: [PeerConnection: SyncStreamDecoder] = [:]
        for await event in node.events {
            let news = directory?.record(event) ?? []
            observer(event)
            switch event {
            case .peerAuthenticated(let info, _, _, let connection):
                streams[connection] = SyncStreamDecoder()
                let tellsNames = directory != nil && info.supportedFeatures.contains(.names)
                let (peer, replaced) = connect(connection, tellsNames: tellsNames)
                if let replaced {
                    await contentDisconnected(replaced)
                    await feed(.disconnected(replaced))
                }
                await feed(.connected(peer, user: info.identity))
                await introduce(peer, news: news)
                if content != nil, info.supportedFeatures.contains(.content) { await contentConnected(peer, connection) }
            case .connectionEnded(_, _, _, let connection?):
                // Keyed by connection: the end of a connection that a newer one replaced
                // finds nothing (its replacement forgot it), whatever order the events take.
                streams[connection] = nil
                if let peer = disconnect(connection) {
                    await contentDisconnected(peer)
                    await feed(.disconnected(peer))
                }
                lastConnectionEnd.withLock { $0 = (.now, false) }
            case .data(let connection, let payload):
                guard let peer = links.withLock({ $0.peers[connection] }), let stream = streams[connection] else { continue }
                let message: SyncMessage
                do {
                    message = try SyncMessage(payload: stream.decode(payload))
                } catch {
                    logger.warning("closing the connection with \(connection.identity): \(error)")
                    node.fail(connection, code: error.code, reason: error.description)
                    continue
                }
                if case .names(let names) = message {
                    await heard(names, from: connection.identity)
                    continue
                }
                if case .content(let message) = message {
                    // Waits while chunks are being verified: this peer is read no faster.
                    await contentReceived(message, on: peer)
                    continue
                }
                await feed(.received(peer, message))
                // Stop reading peers while the store is behind (TCP slows them down).
                await unstored.waitForRoom()
            default:
                break
            }
        }
    }

    // MARK: - Local commits

    /// Reports the store's commits to the core, except those of received operations, which
    /// the storer reports with their source.
    private func consumeCommits(_ changes: ChangeStream) async {
        for await batch in changes {
            if batch.missedBatches > 0 {
                // Commits went unseen: take the summaries afresh (pushes of what was missed
                // are left to anti-entropy) and forget which commits were in flight.
                inFlight.withLock { $0.removeAll() }
                if let summaries = try? await store.fetchLogSummaries() { await feed(.stored(StoreOutcome(summaries: summaries, stored: []))) }
            }
            guard !batch.storedOperations.isEmpty || !batch.summaries.isEmpty else { continue }
            let received = inFlight.withLock { inFlight in
                var found = false
                for signed in batch.storedOperations where inFlight.remove(signed.id) != nil { found = true }
                return found
            }
            if received { continue }
            var outcome = StoreOutcome(summaries: batch.summaries, stored: batch.storedOperations)
            outcome.memberships = batch.memberships
            await feed(.stored(outcome))
        }
    }

    // MARK: - Timers

    private func expire() async {
        do {
            let failed = try await store.expireOutbox(wallMilliseconds: LocalAuthor.systemClock())
            if !failed.isEmpty { logger.notice("\(failed.count) message(s) failed: their time to live ran out") }
        } catch {
            logger.error("cannot expire the outbox: \(error)")
        }
    }

    /// Deletes pending operations stamped longer ago than the store lets them wait, and tells
    /// the core (the peers that sent them may send that many more).
    private func expirePending() async {
        let now = LocalAuthor.systemClock()
        guard now > store.pendingLifetime else { return }
        do {
            let expired = try await store.expirePending(olderThan: now - store.pendingLifetime)
            if !expired.isEmpty {
                logger.info("deleted \(expired.count) pending operation(s) whose causes did not arrive in time")
                await feed(.pendingDropped(expired))
            }
        } catch {
            logger.error("cannot expire pending operations: \(error)")
        }
    }

    private func prune() async {
        let retention = UInt64(configuration.retention.components.seconds) * 1000
        let now = LocalAuthor.systemClock()
        guard now > retention else { return }
        do {
            let pruned = try await store.pruneRelayed(olderThan: now - retention)
            if pruned > 0 {
                logger.info("pruned \(pruned) relayed conversation(s) idle for longer than the retention period")
                await feed(.stored(StoreOutcome(summaries: try await store.fetchLogSummaries(), stored: [])))
            }
        } catch {
            logger.error("cannot prune relayed conversations: \(error)")
        }
        // Content follows its messages (SPEC.md §11.2): what pruning left unreferenced goes,
        // and what a pass before kept because it had just changed.
        await content?.removeUnreferenced()
    }
}
