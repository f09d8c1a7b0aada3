import Dispatch
import Foundation
import Synchronization

/// One content arriving (SPEC.md §11.2): its `.partial` file, sized to the whole content, and its
/// `.journal` of verified chunks. `ContentStore.open` gives it; one per root while open.
///
/// `write` puts a verified chunk's bytes in place and appends its journal record at once, with
/// no sync: a process that dies (SIGKILL, a crash) loses none of them, as the kernel holds
/// both. Durability against a power loss comes in the background: once `syncByteLimit` chunk
/// bytes were written since the last sync began, a job on the store's sync queue syncs the
/// partial file's data (`fdatasync`), then appends a sync mark naming the chunk records it
/// covers and syncs the journal; the synced chunks' pages then leave the page cache, for the
/// chunks still to come to use. Opening trusts the records a sync mark covers and checks the
/// others against their chunk's bytes, so a record never makes the node serve bytes it did not
/// verify, and a transfer killed half way loses nothing it had written.
///
/// One owner (the transfer driver) writes; anyone may read. Writes take the writer's lock
/// (two `pwrite`s under it); syncs wait for the disk outside it; reads only glance at which
/// chunks are verified and read outside it.
public final class PartialContent: Sendable {
    /// The content's root.
    public let root: ContentStore.Root
    /// How the content is cut into chunks.
    public let layout: ContentStore.Layout
    /// What opening found on disk.
    public let recovery: Recovery
    /// Chunk bytes written after which a background sync starts (if none runs).
    public let syncByteLimit: Int

    private let paths: ContentStore.Paths
    private let writer: Mutex<Writer>
    private let readable: Mutex<Readable>
    private let syncQueue: DispatchQueue
    private let onClose: @Sendable (PartialContent) -> Void

    /// What opening a partial content found (the partial content is usable in every case).
    public enum Recovery: Sendable, Hashable, CustomStringConvertible {
        /// Nothing was held (or only files a crash left before any chunk was journaled):
        /// no chunk is verified.
        case created
        /// The journal was read whole.
        case resumed
        /// The journal ended in this many records that were bad or partial (a crash tore
        /// them), or named chunks whose bytes did not match (a power loss lost them); they
        /// were cut off and their chunks are to be fetched again.
        case droppedTornRecords(Int)
        /// The journal (or the partial file) was damaged, and why: a bad header, or a journal
        /// without its partial file.
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

    /// The writer's side: the journal and how far it is synced.
    private struct Writer {
        var phase: Phase = .open
        /// Nil once closed or completed.
        var journal: ContentFile?
        /// The journal's length: where the next record goes.
        var journalLength: Int
        /// Chunk records in the journal, and how many of the first of them a sync covers.
        var chunkRecordCount: Int
        var syncedCount: Int
        /// Chunk bytes written since the last sync began, and whether one runs in the background.
        var bytesSinceSync = 0
        var isSyncing = false
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

    /// Opens or creates the partial content's files (SPEC.md §11.2 "Opening"). Background
    /// syncs run on `syncQueue`.
    init(
        root: ContentStore.Root, layout: ContentStore.Layout, paths: ContentStore.Paths, syncByteLimit: Int,
        syncQueue: DispatchQueue, onClose: @escaping @Sendable (PartialContent) -> Void
    ) throws {
        self.root = root
        self.layout = layout
        self.paths = paths
        self.syncByteLimit = syncByteLimit
        self.syncQueue = syncQueue
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
            var chunkRecordCount = 0, syncedCount = 0
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
                var scan = try ChunkJournal.scan(journal, fileSize: size, layout: layout)
                if !partialExisted && scan.verified.count > 0 {
                    recovery = .restarted(reason: "the journal named \(scan.verified.count) chunks of a partial file that was missing")
                    break
                }
                let cut = try Self.checkUncovered(&scan, data: data, layout: layout)
                verified = scan.verified
                journalLength = scan.goodByteCount
                chunkRecordCount = scan.chunkRecordCount
                syncedCount = scan.coveredCount
                let dropped = scan.cutRecordCount + cut
                recovery = dropped > 0 ? .droppedTornRecords(dropped) : .resumed
                if journalLength != size {
                    try journal.truncate(to: journalLength)
                    try journal.syncData()
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
            writer = Mutex(
                Writer(journal: journal, journalLength: journalLength, chunkRecordCount: chunkRecordCount, syncedCount: syncedCount))
            readable = Mutex(Readable(data: data, verified: verified))
        } catch {
            // Leave nothing behind that this call created (a partial file the disk had no room for).
            for path in created { _ = try? ContentFile.remove(path) }
            throw error
        }
    }

    /// Checks the chunk records no sync mark covers against their chunk's bytes (a process
    /// killed after writing them left both; a power loss may have kept a record and lost its
    /// bytes). From the first that does not match, the records are cut: `scan` is changed to
    /// end there, and the number of records cut is returned.
    private static func checkUncovered(_ scan: inout ChunkJournal.Scan, data: ContentFile, layout: ContentStore.Layout) throws -> Int {
        guard !scan.uncovered.isEmpty else { return 0 }
        var buffer = [UInt8](repeating: 0, count: Int(layout.chunkSize))
        for (position, record) in scan.uncovered.enumerated() {
            let count = layout.byteCount(ofChunk: record.index)
            let matches = try buffer.withUnsafeMutableBytes { raw -> Bool in
                let chunk = UnsafeMutableRawBufferPointer(rebasing: raw[0..<count])
                guard try data.read(into: chunk, at: layout.offset(ofChunk: record.index)) == count else { return false }
                return ChunkJournal.leafHash(of: UnsafeRawBufferPointer(chunk)).elementsEqual(record.hash)
            }
            if matches { continue }
            let cut = scan.uncovered[position...]
            for dropped in cut { scan.verified.remove(dropped.index) }
            // The records after the first mismatch go too (marks among them cover less than it).
            let recordsAfter = (scan.goodByteCount - record.offset) / ChunkJournal.recordByteCount
            scan.goodByteCount = record.offset
            scan.chunkRecordCount -= cut.count
            scan.uncovered.removeSubrange(position...)
            return recordsAfter
        }
        return 0
    }

    // MARK: - State

    /// The chunks verified: written and journaled, their bytes readable, and kept if the
    /// process dies. Those after the last sync may be lost by a power loss (see
    /// `syncedChunkCount`).
    public var verifiedChunks: VerifiedChunks { readable.withLock { $0.verified } }

    /// How many chunk records a sync covers: what a power loss keeps without checking.
    public var syncedChunkCount: Int { writer.withLock { $0.syncedCount } }

    /// The bytes of the verified chunks: what a restart after the process died finds, so what
    /// progress counts (it never goes back across such a restart).
    public var verifiedByteCount: UInt64 {
        let verified = readable.withLock { $0.verified }
        let last = layout.chunkCountValue - 1
        var bytes = UInt64(verified.count) * UInt64(layout.chunkSize)
        if verified.contains(last) { bytes -= UInt64(layout.chunkSize - layout.byteCount(ofChunk: last)) }
        return bytes
    }

    // MARK: - Writing

    /// Writes chunk `index`, already verified against `hash` by the caller, into the partial
    /// file and appends its journal record (starting a background sync once enough bytes were
    /// written since the last). False (and nothing written) if the chunk was already verified.
    ///
    /// Throws `.chunkOutOfRange`, `.wrongChunkLength` or `.wrongHashLength` for a chunk that
    /// does not fit, `.closed` after close, completion or removal, and `.diskFull` or
    /// `.fileSystem` if writing the chunk or its record fails: the chunk is then not verified
    /// (and the journal is as it was).
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
        let startSync = try writer.withLock { writer -> Bool? in
            let data = try usableData(writer)
            guard let journal = writer.journal else { throw closedError() }
            if readable.withLock({ $0.verified.contains(index) }) { return nil }
            try bytes.withUnsafeBytes { try data.write($0, at: layout.offset(ofChunk: index)) }
            try append(ChunkJournal.record(index: UInt32(index), hash: hash), to: journal, &writer)
            writer.chunkRecordCount += 1
            readable.withLock { _ = $0.verified.insert(index) }
            writer.bytesSinceSync += count
            guard writer.bytesSinceSync >= syncByteLimit, !writer.isSyncing else { return false }
            writer.isSyncing = true
            return true
        }
        guard let startSync else { return false }
        if startSync { syncQueue.async { self.syncInBackground() } }
        return true
    }

    /// Appends one record at the journal's end; if it does not all get there, cuts the
    /// journal back so the next record follows whole ones.
    private func append(_ record: [UInt8], to journal: ContentFile, _ writer: inout Writer) throws {
        do {
            try journal.write(record, at: writer.journalLength)
        } catch {
            do {
                try journal.truncate(to: writer.journalLength)
            } catch let cut as ContentStoreError {
                writer.broken = ContentStoreError(
                    .fileSystem, "The journal \(journal.path) could not be cut back after a failed write (\(cut.message)); close and reopen the content.")
            }
            throw error
        }
        writer.journalLength += record.count
    }

    /// Makes every chunk written so far durable against a power loss: syncs the partial
    /// file's data, then appends a sync mark covering their records and syncs the journal.
    /// Waits for the disk (not holding the writer's lock, so writes go on meanwhile).
    public func flush() throws {
        let (data, journal, covered) = try writer.withLock { writer in
            let data = try usableData(writer)
            guard let journal = writer.journal else { throw closedError() }
            writer.bytesSinceSync = 0
            return (data, journal, writer.chunkRecordCount)
        }
        try sync(data, journal, covering: covered)
    }

    /// The background sync `write` starts; another follows at once if enough bytes were written
    /// meanwhile. A failure is left for the next sync or `flush` to meet again (the chunks
    /// stay verified: a process that dies keeps them, and opening checks what no mark covers).
    private func syncInBackground() {
        let started = writer.withLock { writer -> (ContentFile, ContentFile, Int)? in
            guard writer.phase == .open, writer.broken == nil, let journal = writer.journal,
                let data = readable.withLock({ $0.data })
            else {
                writer.isSyncing = false
                return nil
            }
            writer.bytesSinceSync = 0
            return (data, journal, writer.chunkRecordCount)
        }
        guard let (data, journal, covered) = started else { return }
        try? sync(data, journal, covering: covered)
        let again = writer.withLock { writer -> Bool in
            writer.isSyncing = writer.phase == .open && writer.bytesSinceSync >= syncByteLimit
            return writer.isSyncing
        }
        if again { syncQueue.async { self.syncInBackground() } }
    }

    /// Syncs the partial file's data, so that the first `covered` chunk records name durable
    /// bytes; then appends the mark that says so (if the content is still open) and syncs it.
    private func sync(_ data: ContentFile, _ journal: ContentFile, covering covered: Int) throws {
        guard covered > writer.withLock({ $0.syncedCount }) else { return }
        try data.syncData()
        // Chunks are read again only when served or copied out (mostly at once, before this
        // sync): their pages are worth more to the chunks still to come.
        data.dropCachedPages()
        let marked = try writer.withLock { writer -> Bool in
            guard writer.phase == .open, writer.journal === journal, writer.broken == nil else { return false }
            try append(ChunkJournal.syncMark(covering: covered), to: journal, &writer)
            return true
        }
        guard marked else { return }
        try journal.syncData()
        writer.withLock { $0.syncedCount = max($0.syncedCount, covered) }
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
        return try [UInt8](unsafeUninitializedCapacity: byteCount) { bytes, initialized in
            try read(chunks: chunks, into: UnsafeMutableRawBufferPointer(bytes))
            initialized = byteCount
        }
    }

    /// Reads chunks `chunks` into the first bytes of `buffer`, which has room for them (else
    /// `.readTooLarge`), as `read(chunks:)` does: no copy between the file and `buffer`.
    public func read(chunks: Range<Int>, into buffer: UnsafeMutableRawBufferPointer) throws {
        let byteCount = try layout.checkRead(chunks, of: root, into: buffer)
        let (data, missing) = readable.withLock { ($0.data, $0.verified.firstMissing(in: chunks)) }
        guard let data else { throw closedError() }
        if let missing {
            throw ContentStoreError(.chunkMissing, "Chunk \(missing) of content \(root) is not verified.")
        }
        try data.read(exactly: UnsafeMutableRawBufferPointer(rebasing: buffer.prefix(byteCount)), at: layout.offset(ofChunk: chunks.lowerBound))
    }

    /// Copies chunks `chunks`, every one verified (else `.chunkMissing`), to the same place in
    /// `output`, inside the kernel where it can. Works after `complete()` too.
    func copy(chunks: Range<Int>, to output: ContentFile) throws {
        let bytes = try layout.bytes(ofChunks: chunks, of: root)
        let (data, missing) = readable.withLock { ($0.data, $0.verified.firstMissing(in: chunks)) }
        guard let data else { throw closedError() }
        if let missing {
            throw ContentStoreError(.chunkMissing, "Chunk \(missing) of content \(root) is not verified.")
        }
        try data.copy(count: bytes.count, from: bytes.lowerBound, to: output, at: bytes.lowerBound)
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

    /// Syncs (see `flush`) and closes the files; the content stays partial on disk, for
    /// `ContentStore.open` to resume. Closing twice does nothing. The files close even if the
    /// sync fails (opening then checks the chunks no sync covered), and the failure is thrown.
    public func close() throws {
        var failure: (any Error)?
        do { try flush() } catch let error as ContentStoreError where error.code == .closed {
        } catch { failure = error }
        writer.withLock { writer in
            guard writer.phase == .open else { return }
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
            readable.withLock { $0.data = nil }
        }
    }
}
