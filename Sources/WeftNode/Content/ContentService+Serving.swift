import NIOCore
import WeftModel
import WeftStore
import WeftSync
import WeftTransfer

// Serving (SPEC.md §17.8): one server task per content-capable connection answers what its
// peer asks, a few jobs at a time, reading from the disk on the thread pool. Chunks and manifests
// go on the connection's bulk lane, each once the lane has room; everything else on the sync
// lane.

extension ContentService {
    /// Jobs one connection's server works on at once: reading the next chunks while the last
    /// ones are written keeps the connection busy.
    static let jobsServedAtOnce = 4

    /// The server of one connection: answers its queue's jobs until it closes.
    func serve(_ queue: ContentServeQueue) async {
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            while let job = await queue.next() {
                if running == Self.jobsServedAtOnce {
                    await group.next()
                    running -= 1
                }
                group.addTask {
                    await self.perform(job, queue: queue)
                    queue.done(job)
                }
                running += 1
            }
        }
    }

    private func perform(_ job: ContentServeQueue.Job, queue: ContentServeQueue) async {
        switch job {
        case .holdings(let root):
            await answerHoldings(root, queue: queue)
        case .manifest(let root):
            await sendManifest(root, queue: queue)
        case .chunk(let root, let index):
            await sendChunk(index, of: root, link: queue.link)
        }
    }

    // MARK: - HOLDINGS

    private func answerHoldings(_ root: ContentRoot, queue: ContentServeQueue) async {
        let holdings: ContentHoldings
        do {
            holdings = try await blocking { try self.holdings(of: root) }
        } catch {
            if !(error is CancellationError) { logger.error("cannot tell what is held of content \(root): \(error)") }
            return
        }
        if holdings != .all { queue.remember(root) }
        await send(.holdings(root, holdings), to: queue.link)
    }

    /// What this node holds verified of `root`. Blocks (a few `stat`s).
    func holdings(of root: ContentRoot) throws -> ContentHoldings {
        let storeRoot = try ContentStore.Root(root.bytes)
        switch contentStore.holding(storeRoot) {
        case .complete:
            return .all
        case .partial:
            guard let verified = contentStore.verifiedChunks(of: storeRoot), verified.count > 0,
                verified.chunkCount <= ContentDescriptor.maxChunkCount
            else { return .none }
            return .chunks(TransferChunkSet(chunkCount: verified.chunkCount, chunks: verified.verified))
        case .absent:
            return .none
        }
    }

    // MARK: - MANIFEST

    private func sendManifest(_ root: ContentRoot, queue: ContentServeQueue) async {
        let link = queue.link
        let bytes: [UInt8]?
        do {
            bytes = try await blocking { try self.contentStore.readManifest(of: try ContentStore.Root(root.bytes)) }
        } catch {
            if error is CancellationError { return }
            logger.error("cannot read the manifest of content \(root): \(error)")
            bytes = nil
        }
        // Kept only once verified (§11.2); checked again as far as serving needs: its root.
        guard let bytes, bytes.count > ContentManifest.headerByteCount,
            bytes[9..<(9 + ContentRoot.byteCount)].elementsEqual(root.bytes)
        else {
            queue.remember(root)
            await send(.manifest(root, nil), to: link)
            return
        }
        var payload = ByteBuffer()
        payload.reserveCapacity(1 + ContentRoot.byteCount + 1 + bytes.count)
        payload.writeInteger(SyncMessageType.manifest.rawValue)
        payload.writeBytes(root.bytes)
        payload.writeInteger(UInt8(1))
        payload.writeBytes(bytes)
        await link.outbox.waitForBulkRoom()
        link.outbox.enqueueBulk(payload)
        counters.withLock { $0.manifestsServed += 1 }
    }

    // MARK: - CHUNK

    private func sendChunk(_ index: UInt32, of root: ContentRoot, link: ContentLink) async {
        guard let descriptor = await descriptor(of: root), Int(index) < descriptor.chunkCount else {
            await send(.notHeld(root, chunks: [index]), to: link)
            return
        }
        let mimeType = mimeTypes.withLock { $0[root] } ?? "application/octet-stream"
        let message: ByteBuffer?
        do {
            message = try await blocking { try self.chunkMessage(Int(index), of: descriptor, mimeType: mimeType) }
        } catch {
            if error is CancellationError { return }
            logger.error("cannot read chunk \(index) of content \(root) to serve it: \(error)")
            message = nil
        }
        guard let message else {
            await send(.notHeld(root, chunks: [index]), to: link)
            return
        }
        await link.outbox.waitForBulkRoom()
        if link.outbox.isClosed { return }
        link.outbox.enqueueBulk(message)
        counters.withLock { $0.chunksServed += 1 }
        board.sent(root, chunk: Int(index), wireBytes: message.readableBytes - Self.chunkMessageHeaderByteCount)
    }

    /// The type byte and header before a CHUNK message's frame.
    static let chunkMessageHeaderByteCount = 1 + ChunkMessage.headerByteCount

    /// The CHUNK message (type byte, header, frame) of a verified chunk. Its frame is the one
    /// kept when the chunk was first served or when it arrived (§11.2 `ROOT.frames`); it is
    /// made from the chunk's bytes, and kept, only if none is: the first time the node that
    /// added the content serves the chunk (so compression runs on the cores the transfer
    /// leaves, in parallel with it, once), or after a crash tore the frame. A chunk that
    /// travels raw is read from the file straight into the message. Nil if the chunk is not
    /// held. Blocks.
    func chunkMessage(_ index: Int, of descriptor: ContentDescriptor, mimeType: String) throws -> ByteBuffer? {
        let root = try ContentStore.Root(descriptor.root.bytes)
        let layout = try Self.layout(of: descriptor)
        guard let chunkByteCount = descriptor.byteCount(ofChunk: index) else { return nil }
        let frames = try? contentStore.frames(of: root, chunkCount: descriptor.chunkCount, create: false)
        let kept = try? frames?.kept(index)
        var message = ByteBuffer()
        message.reserveCapacity(Self.chunkMessageHeaderByteCount + ChunkFrame.flagsByteCount + chunkByteCount)
        message.writeInteger(SyncMessageType.chunk.rawValue)
        ChunkMessage.writeHeader(root: descriptor.root, index: UInt32(index), to: &message)
        let frameStart = message.writerIndex
        if case .frame(let bytes) = kept {
            message.writeBytes(bytes)
            return message
        }
        message.writeInteger(UInt8(0))  // a raw frame's flags (§17.5)
        do {
            try message.writeWithUnsafeMutableBytes(minimumWritableBytes: chunkByteCount) { free in
                try contentStore.read(root, layout: layout, chunks: index..<index + 1, into: free)
                return chunkByteCount
            }
        } catch let error as ContentStoreError where error.code == .notHeld || error.code == .chunkMissing {
            return nil
        }
        if kept == .raw { return message }
        let compressed = message.withUnsafeReadableBytes { written in
            coders.withEncoder { $0.compressed(UnsafeRawBufferPointer(rebasing: written[(frameStart + 1)...]), mimeType: mimeType) }
        }
        if let compressed {
            // A message of its own size: the chunk-sized buffer goes back to the heap at once,
            // for the next chunk, instead of waiting in the outbox three times too large.
            var smaller = ByteBuffer()
            smaller.reserveCapacity(frameStart + ChunkFrame.flagsByteCount + compressed.count)
            smaller.writeImmutableBuffer(message.getSlice(at: 0, length: frameStart) ?? ByteBuffer())
            smaller.writeInteger(ChunkFrame.compressedFlag)
            smaller.writeBytes(compressed)
            message = smaller
        }
        counters.withLock { $0.framesEncoded += 1 }
        // Kept for the next time; a frame not kept is only made again.
        let store = try? frames ?? contentStore.frames(of: root, chunkCount: descriptor.chunkCount, create: true)
        message.withUnsafeReadableBytes { written in
            try? store?.keep(UnsafeRawBufferPointer(rebasing: written[frameStart...]), of: index)
        }
        return message
    }

    /// The descriptor of a content held, from its manifest's first bytes (cached).
    func descriptor(of root: ContentRoot) async -> ContentDescriptor? {
        if let known = descriptors.withLock({ $0[root] }) { return known }
        let descriptor = try? await blocking { () -> ContentDescriptor? in
            guard let prefix = try self.contentStore.readManifestPrefix(
                of: try ContentStore.Root(root.bytes), count: ContentDescriptor.encodedByteCount)
            else { return nil }
            return try? ContentDescriptor(encoding: prefix)
        }
        guard let descriptor = descriptor ?? nil, descriptor.root == root else { return nil }
        descriptors.withLock { descriptors in
            if descriptors.count >= Self.maxRemembered { descriptors.removeAll() }
            descriptors[root] = descriptor
        }
        return descriptor
    }

    /// Queues an answer on the connection's sync lane, once the lane is below its high mark:
    /// a peer that asks and does not read its answers stops being answered (its requests then
    /// wait in its bounded queue, and more are dropped), so it never grows the lane.
    func send(_ message: ContentTransferMessage, to link: ContentLink) async {
        await link.outbox.waitForRoom()
        if link.outbox.isClosed { return }
        do {
            await link.send(try SyncMessage.content(message).payload())
        } catch {
            logger.error("cannot encode a \(message.type) message for \(link.identity): \(error)")
        }
    }
}
