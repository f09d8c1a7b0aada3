import NIOCore
import WeftCrypto
import WeftModel
import WeftSync

/// The connected peers as the replicator numbers them: one number per connection, so that
/// nothing of an old connection (its writer, its streams, its reads) reaches a new one.
struct Links: ~Copyable {
    var nextPeer: ConnectionNumber = 1
    /// Each authenticated connection's number.
    var peers: [PeerConnection: ConnectionNumber] = [:]
    /// Each identity's current connection (one per peer, `MeshNode`'s rule).
    var current: [PublicIdentity: PeerConnection] = [:]
    var connections: [ConnectionNumber: PeerConnection] = [:]
    var outboxes: [ConnectionNumber: PeerOutbox] = [:]
    /// Each peer's reads from the store, done in order by its reader task. The core has at
    /// most `maxStoreReadsPerPeer` under way per peer, so the buffer never fills.
    var jobs: [ConnectionNumber: AsyncStream<StoreReadJob>.Continuation] = [:]
    /// Connections whose peer set the *names* feature bit (§3.3): the only ones told NAMES.
    var namesPeers: Set<ConnectionNumber> = []
    /// Connections whose peer set the *content* feature bit, as the content service knows them.
    var contentLinks: [ConnectionNumber: ContentLink] = [:]
    var spawn: AsyncStream<@Sendable () async -> Void>.Continuation?
}

/// Operations a peer lacks, to read from the store and send, less what the removal rule
/// withholds from the peer's user (as the core gave it).
struct StoreReadJob: Sendable {
    enum Kind: Sendable {
        /// The log past these heads, less what the peer said it holds.
        case beyond(ConversationID, VersionVector, skipping: HeldOperations)
        case ids([OperationID])
        /// The local user's messages waiting in the outbox.
        case waiting
    }
    var kind: Kind
    var withholding: Withholding?
}

extension Replicator {
    /// Numbers a newly authenticated connection and starts its writer and reader. Returns the
    /// number of the connection of the same peer it replaces, if any. `tellsNames`: the peer
    /// is to be told NAMES.
    func connect(_ connection: PeerConnection, tellsNames: Bool = false) -> (ConnectionNumber, replaced: ConnectionNumber?) {
        let outbox = PeerOutbox(
            connection: connection, highWatermark: configuration.highWatermark, lowWatermark: configuration.lowWatermark)
        let (jobs, jobContinuation) = AsyncStream<StoreReadJob>.makeStream(
            bufferingPolicy: .bufferingOldest(configuration.sync.maxStoreReadsPerPeer + 1))
        let (peer, replaced, spawn) = links.withLock { links in
            let replaced = links.current[connection.identity].flatMap { links.peers[$0] }
            if let replaced { Self.forget(replaced, in: &links) }
            let peer = links.nextPeer
            links.nextPeer += 1
            links.peers[connection] = peer
            links.current[connection.identity] = connection
            links.connections[peer] = connection
            links.outboxes[peer] = outbox
            links.jobs[peer] = jobContinuation
            if tellsNames { links.namesPeers.insert(peer) }
            return (peer, replaced, links.spawn)
        }
        spawn?.yield { await self.write(outbox, peer: peer) }
        spawn?.yield { await self.read(jobs, for: peer, outbox: outbox) }
        return (peer, replaced)
    }

    /// Forgets a connection that ended; returns its number, nil if it was not numbered (it
    /// was replaced before, or never authenticated).
    func disconnect(_ connection: PeerConnection) -> ConnectionNumber? {
        links.withLock { links in
            guard let peer = links.peers[connection] else { return nil }
            Self.forget(peer, in: &links)
            return peer
        }
    }

    private static func forget(_ peer: ConnectionNumber, in links: inout Links) {
        if let connection = links.connections.removeValue(forKey: peer) {
            links.peers[connection] = nil
            if links.current[connection.identity] == connection { links.current[connection.identity] = nil }
        }
        links.outboxes.removeValue(forKey: peer)?.close()
        links.jobs.removeValue(forKey: peer)?.finish()
        links.namesPeers.remove(peer)
    }

    /// The writer: one message at a time, each sent once the previous one left, through this
    /// connection's compressed stream (§14.11), which is why one task writes them all, and
    /// only to this connection.
    private func write(_ outbox: PeerOutbox, peer: ConnectionNumber) async {
        let stream = SyncStreamEncoder()
        while let (message, lane) = await outbox.next() {
            do {
                switch lane {
                case .sync: try await node.send(stream.encode(message), on: outbox.connection)
                // Chunks are compressed once, as their own frames, and never by the stream.
                case .bulk: try await node.send(message, on: outbox.connection)
                }
            } catch {
                // The connection closed: its end event forgets it, which closes the outbox.
                logger.debug("cannot write to \(outbox.connection): \(error)")
            }
            if outbox.written(message.readableBytes, lane: lane) { await feed(.writable(peer, true)) }
        }
    }

    /// The reader: sends a peer the stored operations it lacks, no faster than it takes them,
    /// and tells the core when each read is done.
    private func read(_ jobs: AsyncStream<StoreReadJob>, for peer: ConnectionNumber, outbox: PeerOutbox) async {
        for await job in jobs {
            do {
                switch job.kind {
                case .beyond(let conversation, let heads, let skipping):
                    var cursor = heads
                    while !outbox.isClosed {
                        let operations = try await store.fetchOperations(in: conversation, beyond: cursor, limit: 2_048)
                        if operations.isEmpty { break }
                        for signed in operations {
                            let op = signed.operation
                            if op.sequence > cursor[op.author] { cursor.set(op.author, op.sequence) }
                        }
                        try await sendStored(skipping.isEmpty ? operations : operations.filter { !skipping.contains($0.id) }, to: outbox, peer: peer, withholding: job.withholding)
                        if operations.count < 2_048 { break }
                    }
                case .ids(let ids):
                    try await sendStored(try await store.fetchOperations(ids: ids), to: outbox, peer: peer, withholding: job.withholding)
                case .waiting:
                    let waiting = try await store.fetchOutbox().map(\.message)
                    for chunk in stride(from: 0, to: waiting.count, by: 4_096) where !outbox.isClosed {
                        let ids = Array(waiting[chunk..<min(chunk + 4_096, waiting.count)])
                        try await sendStored(try await store.fetchOperations(ids: ids), to: outbox, peer: peer, withholding: job.withholding)
                    }
                }
            } catch {
                logger.error("cannot read operations to send to \(outbox.connection.identity): \(error)")
            }
            await feed(.storeReadDone(peer))
        }
    }

    /// Queues stored operations for the peer, waiting for room before each message: the
    /// outbox holds at most its high mark and one message more. Crossing the mark tells the
    /// core the peer is not writable, so it starts no more reads until the peer catches up.
    private func sendStored(
        _ operations: [SignedOperation], to outbox: PeerOutbox, peer: ConnectionNumber, withholding: Withholding?
    ) async throws {
        var operations = operations
        if let withholding {
            let logs = withholding.logs
            let judged = operations.filter { logs.contains($0.operation.conversation) }
            if !judged.isEmpty {
                let allowed = withholding.filter(operations, pasts: try await store.fetchCausalPasts(of: judged))
                if allowed.count < operations.count {
                    let kept = Set(allowed.map(\.id))
                    await noteWithheld(operations.filter { !kept.contains($0.id) }, from: withholding.user)
                }
                operations = allowed
            }
        }
        for message in operationMessages(operations, isPush: false) {
            await outbox.waitForRoom()
            if outbox.isClosed { return }
            if !outbox.enqueue(message) { await feed(.writable(peer, false)) }
        }
    }

    /// The local user's messages among `withheld` stay pending with nothing to say why, unless
    /// told: notes in the outbox that the removal rule keeps them from `user`'s node (and
    /// whether it is the only peer connected, so that nothing else can carry them now).
    private func noteWithheld(_ withheld: [SignedOperation], from user: UserID) async {
        let own = withheld.filter { $0.operation.author == store.localUser }.map(\.id)
        guard !own.isEmpty else { return }
        let peers = node.peers
        let name = peers.first { $0.info.identity == user }?.info.displayName ?? ""
        let node = name.isEmpty ? "the node of a user" : "\(name)'s node"
        let onlyPeer = peers.allSatisfy { $0.info.identity == user }
        let reason = onlyPeer
            ? "waiting: the only peer connected, \(node), is one this conversation withholds it from (its user was removed, SPEC §13.3); it goes once another peer connects"
            : "waiting: withheld from \(node) (its user was removed from this conversation, SPEC §13.3); it goes through another peer"
        do {
            try await store.noteWaiting(own, reason: reason)
        } catch {
            logger.error("cannot note why \(own.count) message(s) wait: \(error)")
        }
    }

    /// OPERATIONS messages of at most the core's soft body limit each (one operation may
    /// exceed it alone; none exceeds the DATA payload limit, §12.1 caps an operation).
    func operationMessages(_ operations: [SignedOperation], isPush: Bool) -> [ByteBuffer] {
        var messages: [ByteBuffer] = []
        var chunk: [SignedOperation] = []
        var bytes = 0
        let limit = configuration.sync.messageBodySoftLimit
        func flush() {
            guard !chunk.isEmpty else { return }
            do {
                messages.append(try SyncMessage.operations(.init(isPush: isPush, operations: chunk)).payload())
            } catch {
                logger.error("cannot encode \(chunk.count) operation(s) to send: \(error)")
            }
            chunk = []
            bytes = 0
        }
        for signed in operations {
            let size = SyncMessage.byteCount(of: signed)
            if !chunk.isEmpty, bytes + size > limit || chunk.count == SyncMessage.maxListCount { flush() }
            chunk.append(signed)
            bytes += size
        }
        flush()
        return messages
    }
}
