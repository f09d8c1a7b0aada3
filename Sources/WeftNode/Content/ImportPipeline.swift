import Dispatch
import NIOCore
import WeftStore
import WeftTransfer

/// Hashes and encodes the chunks of content being added on every core, and writes them in
/// order (SPEC.md §17.2–§17.5). A round takes the next `roundChunkCount` chunks: each worker
/// reads one chunk, hashes it and encodes its frame, while one more job writes the previous
/// round's chunks and frames to the import. So reading, hashing, compressing and writing all
/// overlap, and memory holds two rounds.
struct ImportPipeline {
    let coders: ChunkCoders
    let mimeType: String
    /// Chunks hashed and encoded at once: two per core, so a slow chunk does not idle a core.
    var roundChunkCount = max(2, System.coreCount * 2)

    /// One chunk of a round: its bytes (a buffer of the chunk size, `count` of them used), its
    /// leaf hash and frame once done, or why it failed.
    private final class Slot: @unchecked Sendable {
        // @unchecked: a slot is touched by one worker during a round, and by the writer
        // after the round that filled it ends (`concurrentPerform` returns), never at once.
        var bytes: [UInt8]
        var index = 0
        var count = 0
        var hash: ChunkHash?
        var frame: ByteBuffer?
        var failure: (any Error)?

        init(capacity: Int) { bytes = [UInt8](repeating: 0, count: capacity) }
    }

    /// Reads every chunk `builder` expects with `read(buffer, offset)`, appending each one's
    /// hash to `builder` and its bytes and frame to `importing`, in order.
    func run(
        _ builder: inout ContentManifestBuilder, read: (UnsafeMutableRawBufferPointer, Int) throws -> Void,
        into importing: ContentImport
    ) throws {
        let chunkCount = builder.chunkCount
        let chunkByteCount = builder.chunkByteCount
        let total = Int(builder.byteCount)
        // Two sets of slots: one being filled, one being written.
        var filling = (0..<roundChunkCount).map { _ in Slot(capacity: chunkByteCount) }
        var writing = (0..<roundChunkCount).map { _ in Slot(capacity: chunkByteCount) }
        var written: [Slot] = []
        var next = 0
        while next < chunkCount || !written.isEmpty {
            let first = next
            let count = min(roundChunkCount, chunkCount - first)
            let slots = Array(filling[0..<count])
            let writeFailure = withoutActuallyEscaping(read) { read -> (any Error)? in
                let round = Round(read: read, importing: importing, toWrite: written)
                DispatchQueue.concurrentPerform(iterations: count + 1) { job in
                    if job == count {
                        round.write()
                    } else {
                        let offset = (first + job) * chunkByteCount
                        fill(slots[job], index: first + job, at: offset, count: min(chunkByteCount, total - offset), round.read)
                    }
                }
                return round.writeFailure
            }
            if let writeFailure { throw writeFailure }
            for slot in slots {
                if let failure = slot.failure { throw failure }
                guard let hash = slot.hash else { continue }
                try builder.append(leafHash: hash)
            }
            swap(&filling, &writing)
            written = slots
            next += count
        }
    }

    /// Reads chunk `index` (`count` bytes from `offset`) into `slot`, hashes it and encodes
    /// its frame.
    private func fill(
        _ slot: Slot, index: Int, at offset: Int, count: Int, _ read: (UnsafeMutableRawBufferPointer, Int) throws -> Void
    ) {
        slot.index = index
        slot.count = count
        slot.failure = nil
        do {
            try slot.bytes.withUnsafeMutableBytes { raw in
                let chunk = UnsafeMutableRawBufferPointer(rebasing: raw[0..<count])
                try read(chunk, offset)
                slot.hash = ContentTree.leafHash(of: UnsafeRawBufferPointer(chunk))
                slot.frame = coders.withEncoder { $0.encode(UnsafeRawBufferPointer(chunk), mimeType: mimeType) }
            }
        } catch {
            slot.failure = error
        }
    }

    /// What one round's jobs share: the source, the import, and the previous round's slots.
    // @unchecked Sendable: `read` is called by the workers at once (a file's `pread`, or a
    // copy out of bytes no one changes); `importing` and `writeFailure` only by the one job
    // that writes.
    private final class Round: @unchecked Sendable {
        let read: (UnsafeMutableRawBufferPointer, Int) throws -> Void
        let importing: ContentImport
        let toWrite: [Slot]
        var writeFailure: (any Error)?

        init(read: @escaping (UnsafeMutableRawBufferPointer, Int) throws -> Void, importing: ContentImport, toWrite: [Slot]) {
            self.read = read
            self.importing = importing
            self.toWrite = toWrite
        }

        /// Writes the previous round's chunks and frames, in order.
        func write() {
            do {
                for slot in toWrite {
                    try slot.bytes.withUnsafeBytes { try importing.append(UnsafeRawBufferPointer(rebasing: $0[0..<slot.count])) }
                    if let frame = slot.frame {
                        try frame.withUnsafeReadableBytes { try importing.keep(frame: $0, of: slot.index) }
                    }
                }
            } catch {
                writeFailure = error
            }
        }
    }
}
