import NIOCore
import WeftCrypto
import WeftModel
import WeftSync

/// The connected peers as the replicator numbers them.
struct Links: ~Copyable {
    var nextPeer: PeerID = 1
    /// Each connected peer's number (one connection per peer, `MeshNode`'s rule).
    var peers: [PublicIdentity: PeerID] = [:]
    var users: [PeerID: PublicIdentity] = [:]
    var outboxes: [PeerID: PeerOutbox] = [:]
    /// Each peer's reads from the store, done in order by its reader task.
    var jobs: [PeerID: AsyncStream<StoreReadJob>.Continuation] = [:]
    var spawn: AsyncStream<@Sendable () async -> Void>.Continuation?
}

/// Operations a peer lacks, to read from the store and send.
enum StoreReadJob: Sendable {
    /// The log past these heads, less what the peer said it holds.
    case beyond(ConversationID, VersionVector, skipping: HeldOperations)
    case ids([OperationID])
}

extension Replicator {
    /// Numbers a newly authenticated peer and starts its writer and reader. Returns the number
    /// of the connection it replaces, if the peer was connected already.
    func connect(_ identity: PublicIdentity) -> (PeerID, replaced: PeerID?) {
        let outbox = PeerOutbox(
            peer: identity, highWatermark: configuration.highWatermark, lowWatermark: configuration.lowWatermark)
        let (jobs, jobContinuation) = AsyncStream<StoreReadJob>.makeStream()
        let (peer, replaced, spawn) = links.withLock { links in
            let replaced = links.peers[identity]
            if let replaced { Self.forget(replaced, in: &links) }
            let peer = links.nextPeer
            links.nextPeer += 1
            links.peers[identity] = peer
            links.users[peer] = identity
            links.outboxes[peer] = outbox
            links.jobs[peer] = jobContinuation
            return (peer, replaced, links.spawn)
        }
        spawn?.yield { await self.write(outbox, peer: peer) }
        spawn?.yield { await self.read(jobs, for: peer, outbox: outbox) }
        return (peer, replaced)
    }

    /// Forgets a peer whose connection ended; returns its number.
    func disconnect(_ identity: PublicIdentity) -> PeerID? {
        links.withLock { links in
            guard let peer = links.peers[identity] else { return nil }
            Self.forget(peer, in: &links)
            return peer
        }
    }

    private static func forget(_ peer: PeerID, in links: inout Links) {
        if let identity = links.users.removeValue(forKey: peer), links.peers[identity] == peer {
            links.peers[identity] = nil
        }
        links.outboxes.removeValue(forKey: peer)?.close()
        links.jobs.removeValue(forKey: peer)?.finish()
    }

    /// The writer: one message at a time, each sent once the previous one left, through this
    /// connection's compressed stream (§14.11), which is why one task writes them all.
    private func write(_ outbox: PeerOutbox, peer: PeerID) async {
        let stream = SyncStreamEncoder()
        while let message = await outbox.next() {
            do {
                try await node.send(stream.encode(message), to: outbox.peer)
            } catch {
                logger.debug("cannot write to \(outbox.peer): \(error)")
            }
            if outbox.written(message.readableBytes) { feed(.writable(peer, true)) }
        }
    }

    /// The reader: sends a peer the stored operations it lacks, no faster than it takes them.
    private func read(_ jobs: AsyncStream<StoreReadJob>, for peer: PeerID, outbox: PeerOutbox) async {
        for await job in jobs {
            do {
                switch job {
                case .beyond(let conversation, let heads, let skipping):
                    var cursor = heads
                    while !outbox.isClosed {
                        let operations = try store.operations(in: conversation, beyond: cursor, limit: 2_048)
                        if operations.isEmpty { break }
                        for signed in operations {
                            let op = signed.operation
                            if op.sequence > cursor[op.author] { cursor.set(op.author, op.sequence) }
                        }
                        await sendStored(skipping.isEmpty ? operations : operations.filter { !skipping.contains($0.id) }, to: outbox)
                        if operations.count < 2_048 { break }
                    }
                case .ids(let ids):
                    await sendStored(try store.operations(ids: ids), to: outbox)
                }
            } catch {
                logger.error("cannot read operations to send to \(outbox.peer): \(error)")
            }
        }
    }

    private func sendStored(_ operations: [SignedOperation], to outbox: PeerOutbox) async {
        for message in operationMessages(withholding(operations, from: outbox.peer), isPush: false) {
            await outbox.waitForRoom()
            if outbox.isClosed { return }
            _ = outbox.enqueue(message)
        }
    }

    /// `operations` less those the §13.3 rule keeps from `user`'s node.
    func withholding(_ operations: [SignedOperation], from user: PublicIdentity) -> [SignedOperation] {
        guard !operations.isEmpty else { return [] }
        let removals = logsWithRemovals.withLock { $0 }
        let judged = removals.isEmpty ? [] : operations.filter { removals.contains($0.operation.conversation) }
        guard !judged.isEmpty else { return operations }
        do {
            let withheld = try store.withheld(judged, from: user)
            return withheld.isEmpty ? operations : operations.filter { !withheld.contains($0.id) }
        } catch {
            // Unsure: send nothing rather than something the rule forbids.
            logger.error("cannot apply the removal rule for \(user): \(error)")
            return []
        }
    }

    /// OPERATIONS messages of at most the core's soft body limit each (one operation may
    /// exceed it alone).
    func operationMessages(_ operations: [SignedOperation], isPush: Bool) -> [ByteBuffer] {
        var messages: [ByteBuffer] = []
        var chunk: [SignedOperation] = []
        var bytes = 0
        let limit = configuration.sync.messageBodySoftLimit
        for signed in operations {
            let size = SyncMessage.byteCount(of: signed)
            if !chunk.isEmpty, bytes + size > limit || chunk.count == SyncMessage.maxListCount {
                messages.append(SyncMessage.operations(.init(isPush: isPush, operations: chunk)).payload)
                chunk = []
                bytes = 0
            }
            chunk.append(signed)
            bytes += size
        }
        if !chunk.isEmpty { messages.append(SyncMessage.operations(.init(isPush: isPush, operations: chunk)).payload) }
        return messages
    }
}
