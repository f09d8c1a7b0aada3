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
/// The I/O sits here, at the edge: decoding DATA payloads, writing to peers through one
/// writer task each (`PeerOutbox`, whose fill tells the core when a peer stops keeping up),
/// storing received operations in batches (`UnstoredOperations`: one commit and one delivered
/// receipt per conversation per flush interval), reading a peer's missing operations from the
/// store, marking messages sent when a peer acknowledges them, and failing messages whose
/// time to live ran out.
///
/// Runs the `MeshNode` it was given (its only consumer of `events`) as a child task;
/// `run()` returns once the node stopped.
public final class Replicator: Service, Sendable {
    public let node: MeshNode
    public let mailbox: Mailbox
    public let configuration: ReplicationConfiguration
    let logger: Logger
    /// Told of every node event, in order, before the replicator handles it.
    let observer: @Sendable (NodeEvent) -> Void

    let core: Mutex<SyncCore>
    let links = Mutex(Links())
    let unstored: UnstoredOperations
    /// Received operations handed to the store whose commit the change stream has not shown
    /// yet: that commit is reported by the storer (with its source), not as a local one.
    let inFlight = Mutex(Set<OperationID>())
    /// Acknowledged operations waiting to be marked sent.
    let acknowledgements = Mutex(Acknowledgements())
    let clockOrigin = ContinuousClock.now
    /// Logs holding a removal of participants: the only ones whose operations the §13.3 rule
    /// can withhold, so the only ones the store is asked about (it may have to replay the
    /// log to answer). Grows as removals are stored.
    let logsWithRemovals: Mutex<Set<ConversationID>>

    var store: Store { mailbox.store }

    public init(
        node: MeshNode, mailbox: Mailbox, configuration: ReplicationConfiguration = ReplicationConfiguration(),
        logger: Logger = Logger(label: "weft.replication"), observer: @escaping @Sendable (NodeEvent) -> Void = { _ in }
    ) throws {
        self.node = node
        self.mailbox = mailbox
        self.configuration = configuration
        self.logger = logger
        self.observer = observer
        self.unstored = UnstoredOperations(limit: configuration.maxUnstoredOperations)
        self.logsWithRemovals = Mutex(try mailbox.store.logsWithRemovals())
        self.core = Mutex(SyncCore(
            configuration: configuration.sync, localUser: mailbox.localUser, summaries: try mailbox.store.logSummaries()))
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
            group.addTask { await self.consumeEvents() }
            group.addTask { await self.consumeCommits(changes) }
            group.addTask { await self.storeReceived() }
            group.addTask { await self.markAcknowledged() }
            group.addTask { await self.every(self.configuration.tickInterval) { self.feed(.tick(nowMilliseconds: self.now)) } }
            group.addTask { await self.every(self.configuration.expiryInterval) { await self.expire() } }
            group.addTask { await self.every(self.configuration.pruneInterval) { await self.prune() } }
            defer {
                // The node stopped: end every task (those waiting on a continuation, too).
                group.cancelAll()
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

    // MARK: - Feeding the core

    /// Hands an event to the core and carries out its actions, and the events those raise.
    /// Never waits: actions only queue work for the tasks that do it.
    func feed(_ event: SyncEvent) {
        if case .stored(let outcome) = event { noteRemovals(in: outcome.stored) }
        var events = [event]
        while !events.isEmpty {
            let next = events.removeFirst()
            let actions = core.withLock { $0.handle(next) }
            events += perform(actions)
        }
    }

    private func noteRemovals(in operations: [SignedOperation]) {
        let removals = operations.compactMap { signed -> ConversationID? in
            if case .removeParticipants = signed.operation.body { signed.operation.conversation } else { nil }
        }
        if !removals.isEmpty { logsWithRemovals.withLock { $0.formUnion(removals) } }
    }

    // MARK: - Node events

    private func consumeEvents() async {
        // Each connection's incoming compressed stream (§14.11), begun with the connection.
        var streams: [PublicIdentity: SyncStreamDecoder] = [:]
        for await event in node.events {
            observer(event)
            switch event {
            case .peerAuthenticated(let info, _, _):
                streams[info.identity] = SyncStreamDecoder()
                let (peer, replaced) = connect(info.identity)
                if let replaced { feed(.disconnected(replaced)) }
                feed(.connected(peer, user: info.identity))
            case .connectionEnded(let info?, _, _):
                // Events of different connections interleave: a peer's new connection may be
                // reported before its old one's end. The node unregisters a connection before
                // reporting its end, so a peer it still lists has a newer connection, which its
                // own peerAuthenticated replaces (or replaced) in the core: this end is stale.
                guard !node.isConnected(info.identity) else { continue }
                if let peer = disconnect(info.identity) {
                    streams[info.identity] = nil
                    feed(.disconnected(peer))
                }
            case .data(let identity, let payload):
                guard let peer = links.withLock({ $0.peers[identity] }), let stream = streams[identity] else { continue }
                let message: SyncMessage
                do {
                    message = try SyncMessage(payload: stream.decode(payload))
                } catch {
                    logger.warning("closing the connection with \(identity): \(error)")
                    node.fail(identity, code: error.code, reason: error.description)
                    continue
                }
                feed(.received(peer, message))
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
                if let summaries = try? store.logSummaries() { feed(.stored(StoreOutcome(summaries: summaries, stored: []))) }
            }
            guard !batch.storedOperations.isEmpty || !batch.summaries.isEmpty else { continue }
            let received = inFlight.withLock { inFlight in
                var found = false
                for signed in batch.storedOperations where inFlight.remove(signed.id) != nil { found = true }
                return found
            }
            if received { continue }
            feed(.stored(StoreOutcome(summaries: batch.summaries, stored: batch.storedOperations)))
        }
    }

    // MARK: - Timers

    private func expire() async {
        do {
            let failed = try await store.expireOutbox(wallMilliseconds: Mailbox.systemClock())
            if !failed.isEmpty { logger.notice("\(failed.count) message(s) failed: their time to live ran out") }
        } catch {
            logger.error("cannot expire the outbox: \(error)")
        }
    }

    private func prune() async {
        let retention = UInt64(configuration.retention.components.seconds) * 1000
        let now = Mailbox.systemClock()
        guard now > retention else { return }
        do {
            let pruned = try await store.pruneRelayed(olderThan: now - retention)
            if pruned > 0 {
                logger.info("pruned \(pruned) relayed conversation(s) idle for longer than the retention period")
                feed(.stored(StoreOutcome(summaries: try store.logSummaries(), stored: [])))
            }
        } catch {
            logger.error("cannot prune relayed conversations: \(error)")
        }
    }
}
