import Foundation
import Synchronization

/// One content arriving (SPEC.md §11.2): its `.partial` file, sized to the whole content, and its
/// `.journal` of verified chunks. `ContentStore.open` gives it; one per root while open.
///
/// `write` puts a verified chunk's bytes in place at once (readable from then on) and
/// journals it in batches: every `ContentStore.batchChunkLimit` chunks or `batchByteLimit`
/// bytes, and on `flush`, the partial file's data is synced (`fdatasync`), then the batch's
/// records are appended to the journal and it is synced. So a record never names a chunk
/// whose bytes are not durable, and after a crash reopening gives exactly the chunks whose
/// records are durable (`durableChunkCount` of them at least); the others are fetched again.
///
/// One owner (the transfer driver) writes; anyone may read. Writes, flushes and completion
/// take the writer's lock (waiting for the disk under it); reads only glance at which chunks
/// are verified and read outside it.
public final class PartialContent: Sendable {
    /// The content's root.
    public let root: ContentStore.Root
    /// How the content is cut into chunks.
    public let layout: ContentStore.Layout
    /// What opening found on disk.
    public let recovery: Recovery
    /// Chunk bytes written before a flush, unless the chunk limit comes first.
    public let batchByteLimit: Int

    private let paths: ContentStore.Paths
    private let writer: Mutex<Writer>
    private let readable: Mutex<Readable>
    private let onClose: @Sendable (PartialContent) -> Void

    /// What opening a partial content found (the partial content is usable in every case).
    public enum Recovery: Sendable, Hashable, CustomStringConvertible {
        /// Nothing was held (or only files a crash left before any chunk was journaled):
        /// no chunk is verified.
        case created
        /// The journal was read whole.
        case resumed
        /// The journal ended in this many bad or partial records that a crash tore before
        /// they were durable; they were cut off and their chunks are to be fetched again.
        case droppedTornRecords(Int)
        /// The journal (or the partial file) was damaged, and why: a bad record before the
        /// records a crash can tear, a bad header, or a journal without its partial file.
        /// Nothing it named is trusted: the journal was started afresh with no chunk verified.
        case restarted(reason: String)

        public var description: String {
            switch self {
            case .created: "created"
            case .resumed: "resumed from the journal"
            case .droppedTornRecords(let count): "resumed, \(count) torn record\(count == 1 ? "" : "s") at the journal's end dropped"
            case .restarted(let reason): "the journal was damaged (\(reason)); started again with no chunk verified"
            }
        }
    }

    /// The writer's side: the journal, and the chunks written since the last flush.
    private struct Writer {
        var phase: Phase = .open
        /// Nil once closed or completed.
        var journal: ContentFile?
        /// The journal's length up to its last durable record.
        var journalLength: Int
        /// Chunks written and not yet journaled, with the hashes they were verified against.
        var pending: [(index: Int, hash: [UInt8])] = []
        var pendingBytes = 0
        var durableCount: Int
        /// Set when the journal could not be cut back after a failed append: every later
        /// write fails with it (reopening cuts the tail).
        var broken: ContentStoreError?
    }

    private enum Phase { case open, closed, complete }

    /// What readers see: the chunks verified, and the data file while it is held.
    private struct Readable {
        var data: ContentFile?
        var verified: VerifiedChunks
    }

    // MARK: - Opening

    /// Opens or creates the partial content's files (SPEC.md §11.2 "Opening").
    init(
        root: ContentStore.Root, layout: ContentStore.Layout, paths: ContentStore.Paths, batchByteLimit: Int,
        onClose: @escaping @Sendable (PartialContent) -> Void
    ) throws {
        self.root = root
        self.layout = layout
        self.paths = paths
        self.batchByteLimit = batchByteLimit
        self.onClose = onClose

        let partialExisted = ContentFile.exists(paths.partial)
        let journalExisted = ContentFile.exists(paths.journal)
        var created: [String] = []
        do {
            guard let data = try ContentFile.open(paths.partial, create: true) else {
                throw ContentStoreError(.fileSystem, "Cannot create \(paths.partial).")
            }
            if !partialExisted { created.append(paths.partial) }
            guard let journal = try ContentFile.open(paths.journal, create: true) else {
                throw ContentStoreError(.fileSystem, "Cannot create \(paths.journal).")
            }
            if !journalExisted { created.append(paths.journal) }

            let size = try journal.size()
            var verified = VerifiedChunks(chunkCount: layout.chunkCountValue)
            var journalLength = ChunkJournal.headerByteCount
            var recovery = Recovery.created
            switch ChunkJournal.readHeader(try journal.read(count: min(size, ChunkJournal.headerByteCount), at: 0)) {
            case .absent:
                recovery = .created
            case .damaged(let reason):
                recovery = .restarted(reason: "the journal \(reason)")
            case .valid(let heldRoot, _) where heldRoot != root:
                recovery = .restarted(reason: "the journal names content \(heldRoot)")
            case .valid(_, let heldLayout) where heldLayout != layout:
                guard partialExisted else {
                    recovery = .restarted(reason: "the journal was left without its partial file")
                    break
                }
                throw ContentStoreError(.conflictingLayout, "Content \(root) is held as \(heldLayout), not \(layout).")
            case .valid:
                let scan = try ChunkJournal.scan(journal, fileSize: size, layout: layout)
                if let damage = scan.damage {
                    recovery = .restarted(reason: "the journal's \(damage)")
                } else if !partialExisted && scan.verified.count > 0 {
                    recovery = .restarted(reason: "the journal named \(scan.verified.count) chunks of a partial file that was missing")
                } else {
                    verified = scan.verified
                    journalLength = scan.goodByteCount
                    recovery = scan.tornRecordCount > 0 ? .droppedTornRecords(scan.tornRecordCount) : .resumed
                    if journalLength != size {
                        try journal.truncate(to: journalLength)
                        try journal.syncData()
                    }
                }
            }
            // Only now, the layout agreed: a refused layout changes nothing.
            try data.allocate(size: Int(layout.totalSize))
            switch recovery {
            case .created, .restarted:
                // A new journal: its header durable, and both names, before any record.
                try journal.truncate(to: 0)
                try journal.write(ChunkJournal.header(root: root, layout: layout), at: 0)
                try journal.syncData()
                try ContentFile.syncDirectory(paths.directory)
            case .resumed, .droppedTornRecords:
                break
            }
            self.recovery = recovery
            writer = Mutex(Writer(journal: journal, journalLength: journalLength, durableCount: verified.count))
            readable = Mutex(Readable(data: data, verified: verified))
        } catch {
            // Leave nothing behind that this call created (a partial file the disk had no room for).
            for path in created { _ = try? ContentFile.remove(path) }
            throw error
        }
    }

    // MARK: - State

    /// The chunks verified: written, their bytes readable. Those after the last flush are
    /// not yet durable (see `durableChunkCount`).
    public var verifiedChunks: VerifiedChunks { readable.withLock { $0.verified } }

    /// How many verified chunks are durable: their records synced in the journal, so a crash
    /// keeps them.
    public var durableChunkCount: Int { writer.withLock { $0.durableCount } }

    /// The bytes of the durable chunks: what a crash keeps, so what progress may count without
    /// ever going back after a restart. Waits for a flush under way.
    public var durableByteCount: UInt64 {
        writer.withLock { writer in
            let verified = readable.withLock { $0.verified }
            let last = layout.chunkCountValue - 1
            var bytes = UInt64(verified.count) * UInt64(layout.chunkSize)
            if verified.contains(last) { bytes -= UInt64(layout.chunkSize - layout.byteCount(ofChunk: last)) }
            for chunk in writer.pending { bytes -= UInt64(layout.byteCount(ofChunk: chunk.index)) }
            return bytes
        }
    }

    // MARK: - Writing

    /// Writes chunk `index`, already verified against `hash` by the caller, into the partial
    /// file, and journals it with the batch (flushing when the batch is full). False (and
    /// nothing written) if the chunk was already verified.
    ///
    /// Throws `.chunkOutOfRange`, `.wrongChunkLength` or `.wrongHashLength` for a chunk that
    /// does not fit, `.closed` after close, completion or removal, and `.diskFull` or
    /// `.fileSystem` if writing or the flush it triggers fails: the chunks of the batch that
    /// failed (this one among them) are then not verified (`verifiedChunks` says which are).
    @discardableResult
    public func write(chunk index: Int, bytes: some ContiguousBytes, hash: [UInt8]) throws -> Bool {
        guard index >= 0, index < layout.chunkCountValue else {
            throw ContentStoreError(.chunkOutOfRange, "Chunk \(index) is not among the \(layout.chunkCount) of content \(root).")
        }
        let expected = layout.byteCount(ofChunk: index)
        let count = bytes.withUnsafeBytes { $0.count }
        guard count == expected else {
            throw ContentStoreError(.wrongChunkLength, "Chunk \(index) of content \(root) is \(expected) bytes, not \(count).")
        }
        guard hash.count == ChunkJournal.hashByteCount else {
            throw ContentStoreError(.wrongHashLength, "A chunk hash is \(ChunkJournal.hashByteCount) bytes, not \(hash.count).")
        }
        return try writer.withLock { writer in
            let data = try usableData(writer)
            if readable.withLock({ $0.verified.contains(index) }) { return false }
            try bytes.withUnsafeBytes { try data.write($0, at: layout.offset(ofChunk: index)) }
            writer.pending.append((index, hash))
            writer.pendingBytes += count
            readable.withLock { _ = $0.verified.insert(index) }
            if writer.pending.count >= ContentStore.batchChunkLimit || writer.pendingBytes >= batchByteLimit {
                try flush(&writer, data)
            }
            return true
        }
    }

    /// Makes every chunk written so far durable: syncs the partial file's data, then appends
    /// their records to the journal and syncs it. On failure those chunks are no longer
    /// verified (`.diskFull` if the journal found the disk full: pause, free space, fetch them
    /// again).
    public func flush() throws {
        try writer.withLock { writer in
            let data = try usableData(writer)
            try flush(&writer, data)
        }
    }

    private func flush(_ writer: inout Writer, _ data: ContentFile) throws {
        guard !writer.pending.isEmpty, let journal = writer.journal else { return }
        do {
            try data.syncData()
        } catch {
            drop(&writer)
            throw error
        }
        var records: [UInt8] = []
        records.reserveCapacity(writer.pending.count * ChunkJournal.recordByteCount)
        for (index, hash) in writer.pending {
            records += ChunkJournal.record(index: UInt32(index), hash: hash)
        }
        do {
            try journal.write(records, at: writer.journalLength)
            try journal.syncData()
        } catch {
            // Records that did not all reach the disk must not stay: cut back to the last
            // durable one, so the next batch follows whole records.
            do {
                try journal.truncate(to: writer.journalLength)
            } catch let cut as ContentStoreError {
                writer.broken = ContentStoreError(
                    .fileSystem, "The journal \(journal.path) could not be cut back after a failed write (\(cut.message)); close and reopen the content.")
            }
            drop(&writer)
            throw error
        }
        writer.journalLength += records.count
        writer.durableCount += writer.pending.count
        writer.pending = []
        writer.pendingBytes = 0
    }

    /// Forgets the chunks written since the last flush: they are fetched again.
    private func drop(_ writer: inout Writer) {
        let pending = writer.pending
        readable.withLock { readable in
            for chunk in pending { readable.verified.remove(chunk.index) }
        }
        writer.pending = []
        writer.pendingBytes = 0
    }

    /// The data file, if the content is open and writable.
    private func usableData(_ writer: Writer) throws -> ContentFile {
        if let broken = writer.broken { throw broken }
        guard writer.phase == .open, let data = readable.withLock({ $0.data }) else { throw closedError() }
        return data
    }

    private func closedError() -> ContentStoreError {
        ContentStoreError(.closed, "Partial content \(root) was closed, completed or removed; open it again.")
    }

    // MARK: - Reading

    /// The bytes of chunks `chunks`, concatenated, if every one of them is verified
    /// (`.chunkMissing` if not). At most `ContentStore.maxReadByteCount` bytes. Works after
    /// `complete()` too.
    public func read(chunks: Range<Int>) throws -> [UInt8] {
        let byteCount = try layout.checkRead(chunks, of: root)
        let (data, missing) = readable.withLock { ($0.data, $0.verified.firstMissing(in: chunks)) }
        guard let data else { throw closedError() }
        if let missing {
            throw ContentStoreError(.chunkMissing, "Chunk \(missing) of content \(root) is not verified.")
        }
        return try data.read(count: byteCount, at: layout.offset(ofChunk: chunks.lowerBound))
    }

    // MARK: - Completing and closing

    /// Once every chunk is verified: syncs the partial file, renames it to the root's name,
    /// makes it read-only, syncs the directory and deletes the journal. The content is then
    /// complete (reads of this object still work); `ContentStore.open` reports it so.
    /// Throws `.incomplete` if a chunk is missing, and leaves everything as it was.
    public func complete() throws {
        var failure: (any Error)?
        try writer.withLock { writer in
            // A journal broken by a failed append does not matter: it is deleted.
            guard writer.phase == .open, let data = readable.withLock({ $0.data }) else { throw closedError() }
            let verified = readable.withLock { $0.verified }
            guard verified.isComplete else {
                throw ContentStoreError(
                    .incomplete, "Content \(root) is not complete: \(verified.count) of \(layout.chunkCount) chunks are verified.")
            }
            try data.sync()
            try ContentFile.rename(paths.partial, to: paths.complete)
            // Complete from here on: the rest only tidies up, and a crash before it ends
            // leaves a journal that opening removes.
            writer.phase = .complete
            writer.journal = nil
            writer.pending = []
            writer.pendingBytes = 0
            do {
                try data.makeReadOnly()
                try ContentFile.syncDirectory(paths.directory)
                try ContentFile.remove(paths.journal)
                try ContentFile.syncDirectory(paths.directory)
            } catch {
                failure = error
            }
        }
        onClose(self)
        if let failure { throw failure }
    }

    /// Flushes (see `flush`) and closes the files; the content stays partial on disk, for
    /// `ContentStore.open` to resume. Closing twice does nothing. The files close even if
    /// the flush fails (its chunks are then fetched again), and the failure is thrown.
    public func close() throws {
        var failure: (any Error)?
        writer.withLock { writer in
            guard writer.phase == .open else { return }
            if let data = readable.withLock({ $0.data }), writer.broken == nil {
                do { try flush(&writer, data) } catch { failure = error }
            }
            writer.phase = .closed
            writer.journal = nil
            readable.withLock { $0.data = nil }
        }
        onClose(self)
        if let failure { throw failure }
    }

    /// Closes without flushing, for `ContentStore.remove` (which forgets it itself).
    func discard() {
        writer.withLock { writer in
            if writer.phase == .open { writer.phase = .closed }
            writer.journal = nil
            writer.pending = []
            readable.withLock { $0.data = nil }
        }
    }
}
