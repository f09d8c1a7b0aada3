import Dispatch
import NIOCore
import WeftStore
import WeftTransfer

/// Hashes the chunks of content being added on every core, and writes them in order (SPEC.md
/// §17.2–§17.3). A round takes the next `roundChunkCount` chunks: each worker reads one chunk
/// and hashes it, while one more job writes the previous round's chunks to the import. So
/// reading, hashing and writing overlap, and memory holds two rounds.
///
/// Chunks are not compressed here: the node compresses each chunk the first time it serves
/// it, on the cores the transfer leaves, and keeps that frame for every later send
/// (`ContentService.chunkMessage(_:of:mimeType:)`).
struct ImportPipeline {
    /// Chunks hashed at once: two per core, so a slow chunk does not idle a core.
    var roundChunkCount = max(2, System.coreCount * 2)

    /// One chunk of a round: its bytes (a buffer of the chunk size, `count` of them used), and
    /// its leaf hash once done, or why it failed.
    private final class Slot: @unchecked Sendable {
        // @unchecked: a slot is touched by one worker during a round, and by the writer
        // after the round that filled it ends (`concurrentPerform` returns), never at once.
        var bytes: [UInt8]
        var count = 0
        var hash: ChunkHash?
        var failure: (any Error)?

        init(capacity: Int) { bytes = [UInt8](repeating: 0, count: capacity) }
    }

    /// Reads every chunk `builder` expects with `read(buffer, offset)`, appending each one's
    /// hash to `builder` and its bytes to `importing`, in order.
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
                        Self.fill(slots[job], at: offset, count: min(chunkByteCount, total - offset), round.read)
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

    /// Reads `count` bytes from `offset` into `slot` and hashes them.
    private static func fill(_ slot: Slot, at offset: Int, count: Int, _ read: (UnsafeMutableRawBufferPointer, Int) throws -> Void) {
        slot.count = count
        slot.failure = nil
        do {
            try slot.bytes.withUnsafeMutableBytes { raw in
                let chunk = UnsafeMutableRawBufferPointer(rebasing: raw[0..<count])
                try read(chunk, offset)
                slot.hash = ContentTree.leafHash(of: UnsafeRawBufferPointer(chunk))
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

        /// Writes the previous round's chunks, in order.
        func write() {
            do {
                for slot in toWrite {
                    try slot.bytes.withUnsafeBytes { try importing.append(UnsafeRawBufferPointer(rebasing: $0[0..<slot.count])) }
                }
            } catch {
                writeFailure = error
            }
        }
    }
}
