import NIOCore
import WeftModel
import WeftStore
import WeftTransfer

// The download driver's work on the disk: each job runs on NIO's thread pool (the content
// store blocks) in a task of the service's group, and reports back through the driver's queue.

extension ContentService {
    /// Opens (or reopens) a content to fetch, and reads its manifest if held.
    func open(_ descriptor: ContentDescriptor) {
        spawn.yield {
            let outcome: ContentEvent.OpenOutcome
            do {
                outcome = try await self.blocking { try self.openBlocking(descriptor) }
            } catch is CancellationError {
                return
            } catch {
                outcome = Self.isDiskFull(error) ? .diskFull(Self.reason(error)) : .failed(Self.reason(error))
            }
            await self.events.send(.opened(descriptor.root, outcome))
        }
    }

    private func openBlocking(_ descriptor: ContentDescriptor) throws -> ContentEvent.OpenOutcome {
        let root = try ContentStore.Root(descriptor.root.bytes)
        switch try contentStore.open(root, layout: try Self.layout(of: descriptor)) {
        case .complete:
            return .complete
        case .partial(let partial):
            var manifest: ContentManifest?
            if let bytes = try contentStore.readManifest(of: root) {
                do {
                    let held = try ContentManifest(wire: ByteBuffer(bytes: bytes))
                    if held.descriptor == descriptor { manifest = held }
                } catch {
                    logger.warning("the manifest kept for content \(descriptor.root) is damaged (\(error)); fetching it again")
                }
            }
            let verified = TransferChunkSet(chunkCount: descriptor.chunkCount, chunks: partial.verifiedChunks.verified)
            return .partial(partial, manifest: manifest, heldBytes: partial.verifiedByteCount, verified: verified)
        }
    }

    /// Keeps a manifest that arrived (verified against the descriptor wanted).
    func save(_ manifest: ContentManifest) {
        spawn.yield {
            var failure: String?
            do {
                try await self.blocking {
                    try self.contentStore.writeManifest(Array(manifest.wire.readableBytesView), for: try ContentStore.Root(manifest.root.bytes))
                }
            } catch is CancellationError {
                return
            } catch {
                failure = Self.reason(error)
            }
            await self.events.send(.manifestSaved(manifest.root, manifest, failure: failure))
        }
    }

    /// Checks a chunk against the manifest (§17.6) and writes it. The caller holds a
    /// verification slot, given back here once the chunk is written.
    func check(_ chunk: ChunkMessage, manifest: ContentManifest, partial: PartialContent, from link: ContentLink) {
        let spawned = spawn.yield {
            let outcome: ContentEvent.ChunkOutcome
            do {
                outcome = try await self.blocking { self.checkBlocking(chunk, manifest: manifest, partial: partial) }
            } catch {
                self.verifying.release()
                return  // cancelled: the node stops
            }
            self.verifying.release()
            await self.events.send(.chunkChecked(link, chunk.root, chunk: Int(chunk.index), outcome))
        }
        if case .terminated = spawned { verifying.release() }
    }

    private func checkBlocking(_ chunk: ChunkMessage, manifest: ContentManifest, partial: PartialContent) -> ContentEvent.ChunkOutcome {
        let index = Int(chunk.index)
        let written: Result<Bool, any Error>
        do {
            // Written from where the decoder verified it: a raw chunk from the frame itself.
            // The decoder checked the index against the manifest.
            written = try coders.withDecoder { decoder in
                try decoder.withChunk(chunk, manifest: manifest) { bytes in
                    Result { try partial.write(chunk: index, bytes: bytes, hash: manifest.hashes[index].bytes) }
                }
            }
        } catch let error as ContentError {
            // A bad hash may be a relay's damaged disk; anything else no honest encoder makes.
            return error.reason == .badHash ? .corrupt(error.description) : .violation(error.description)
        } catch {
            return .violation("\(error)")
        }
        do {
            let isNew = try written.get()
            if isNew { keep(chunk.frame, ofChunk: index, of: manifest.descriptor) }
            return isNew ? .written(heldBytes: partial.verifiedByteCount) : .duplicate
        } catch let error as ContentStoreError where error.code == .closed {
            return .closed
        } catch {
            return Self.isDiskFull(error) ? .diskFull(Self.reason(error)) : .failed(Self.reason(error))
        }
    }

    /// Keeps a verified chunk's frame as it arrived, so that this node serves it on without
    /// compressing it again (a cache: a frame not kept is made again when served).
    private func keep(_ frame: ByteBuffer, ofChunk index: Int, of descriptor: ContentDescriptor) {
        do {
            let root = try ContentStore.Root(descriptor.root.bytes)
            let frames = try contentStore.frames(of: root, chunkCount: descriptor.chunkCount, create: true)
            try frame.withUnsafeReadableBytes { try frames?.keep($0, of: index) }
        } catch {
            logger.debug("cannot keep the frame of chunk \(index) of content \(descriptor.root): \(error)")
        }
    }

    /// Completes a content whose every chunk is verified.
    func complete(_ partial: PartialContent, root: ContentRoot) {
        spawn.yield {
            let outcome: ContentEvent.CompletionOutcome
            do {
                try await self.blocking { try partial.complete() }
                outcome = .complete
            } catch is CancellationError {
                return
            } catch let error as ContentStoreError where error.code == .incomplete {
                let verified = partial.verifiedChunks
                outcome = .incomplete(TransferChunkSet(chunkCount: verified.chunkCount, chunks: verified.verified))
            } catch {
                outcome = Self.isDiskFull(error) ? .diskFull(Self.reason(error)) : .failed(Self.reason(error))
            }
            await self.events.send(.finished(root, outcome))
        }
    }

    /// Flushes and closes a partial content no longer fetched (it stays on disk, to resume).
    func closeInBackground(_ partial: PartialContent) {
        spawn.yield {
            do {
                try await self.blocking { try partial.close() }
            } catch {
                self.logger.warning("cannot close partial content \(partial.root): \(error)")
            }
        }
    }

    // MARK: - Helpers

    static func layout(of descriptor: ContentDescriptor) throws -> ContentStore.Layout {
        try ContentStore.Layout(totalSize: descriptor.byteCount, chunkLog: descriptor.chunkLog)
    }

    static func isDiskFull(_ error: any Error) -> Bool {
        (error as? ContentStoreError)?.code == .diskFull
    }

    /// The error in one sentence: "disk full" first when it is.
    static func reason(_ error: any Error) -> String {
        guard let error = error as? ContentStoreError else { return "\(error)" }
        return error.code == .diskFull ? "disk full (\(error.message))" : error.message
    }
}
