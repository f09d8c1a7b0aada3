import Foundation
import Synchronization

// What the content store keeps beside a content's bytes (SPEC.md §11.2): its manifest, and
// content added by this node, written whole before it has a name.

extension ContentStore {
    // MARK: - Manifests

    /// Most bytes a manifest file may hold (a §17.4 manifest is at most 524,333 bytes).
    public static let maxManifestByteCount = 1 << 20

    /// Keeps `bytes` (the content's manifest, SPEC.md §17.4; opaque here) as `ROOT.manifest`,
    /// written durably and atomically: `ROOT.manifest.tmp` created afresh (mode 0600, never
    /// through a symbolic link), written and synced, renamed, and the directory synced.
    /// Throws `.diskFull` when it does not fit (nothing is then left behind).
    public func writeManifest(_ bytes: [UInt8], for root: Root) throws {
        guard bytes.count <= Self.maxManifestByteCount else {
            throw ContentStoreError(
                .readTooLarge, "A manifest of \(bytes.count) bytes is over the \(Self.maxManifestByteCount) the store keeps.")
        }
        let paths = Paths(directory: directory.path, root: root)
        let temporary = paths.manifest + ".tmp"
        try ContentFile.remove(temporary)
        let file = try ContentFile.create(temporary)
        do {
            try file.write(bytes, at: 0)
            try file.sync()
            try ContentFile.rename(temporary, to: paths.manifest)
        } catch {
            _ = try? ContentFile.remove(temporary)
            throw error
        }
        try ContentFile.syncDirectory(paths.directory)
    }

    /// The bytes of `ROOT.manifest`, or nil if there is none. Throws `.readTooLarge` for a
    /// file over `maxManifestByteCount` (a manifest is never that long: damage).
    public func readManifest(of root: Root) throws -> [UInt8]? {
        let paths = Paths(directory: directory.path, root: root)
        guard let file = try ContentFile.openForReading(paths.manifest) else { return nil }
        let size = try file.size()
        guard size <= Self.maxManifestByteCount else {
            throw ContentStoreError(.readTooLarge, "\(paths.manifest) is \(size) bytes, more than a manifest can be.")
        }
        return try file.read(count: size, at: 0)
    }

    /// The first `count` bytes of `ROOT.manifest` (at most its length), or nil if there is
    /// none: what is needed of a manifest to serve its content (its descriptor).
    public func readManifestPrefix(of root: Root, count: Int) throws -> [UInt8]? {
        let paths = Paths(directory: directory.path, root: root)
        guard let file = try ContentFile.openForReading(paths.manifest) else { return nil }
        return try file.read(count: min(count, try file.size()), at: 0)
    }

    // MARK: - What is held

    /// The layout in the journal of a partial content (what it was opened with), or nil if
    /// it has no journal or the journal's header is not one Weft wrote for that root: for a
    /// node that resumes its transfers after a restart.
    public func journalLayout(of root: Root) throws -> Layout? {
        let paths = Paths(directory: directory.path, root: root)
        guard let file = try ContentFile.openForReading(paths.journal) else { return nil }
        let bytes = try file.read(count: min(ChunkJournal.headerByteCount, try file.size()), at: 0)
        guard case .valid(let heldRoot, let layout) = ChunkJournal.readHeader(bytes), heldRoot == root else { return nil }
        return layout
    }

    /// The chunks verified of a partial content open in this store; nil if it is not open.
    /// Never touches the disk.
    public func verifiedChunks(of root: Root) -> VerifiedChunks? {
        openPartials.handles.withLock { $0[root] }?.verifiedChunks
    }

    /// The file of a complete content (`content/ROOT`), if the store holds it complete.
    public func completeFile(of root: Root) -> URL? {
        let paths = Paths(directory: directory.path, root: root)
        return ContentFile.exists(paths.complete) ? URL(fileURLWithPath: paths.complete) : nil
    }

    // MARK: - Adding content

    /// Starts adding content this node has (a file a user sends): its bytes are written, in
    /// order, to `import-RANDOM.tmp` in the content directory, and named by their root once
    /// all are in (`ContentImport.finish`), so the content is read once and never held in
    /// memory whole.
    public func beginImport() throws -> ContentImport {
        var random = SystemRandomNumberGenerator()
        let name = "import-" + String(random.next(), radix: 16) + ".tmp"
        let path = directory.path + "/" + name
        return ContentImport(store: self, path: path, file: try ContentFile.create(path))
    }

    /// Deletes what imports and manifest writes a crash interrupted (`import-*.tmp`,
    /// `ROOT.manifest.tmp`): a node calls it when it starts, before it imports anything.
    public func removeStaleImports() throws {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw ContentStoreError(.fileSystem, "Cannot list \(directory.path): \(error.localizedDescription)")
        }
        var removed = false
        for name in names where name.hasSuffix(".tmp") && (name.hasPrefix("import-") || name.hasSuffix(".manifest.tmp")) {
            removed = try ContentFile.remove(directory.path + "/" + name) || removed
        }
        if removed { try ContentFile.syncDirectory(directory.path) }
    }

    /// Names an import's file: `ROOT`, read-only, unless the content is held complete already
    /// (the import is then dropped, and the held one marked changed now). A partial content of
    /// that root that is not open is removed (the complete one replaces it); one that is open
    /// stays open, and its reads see the complete file once it closes.
    fileprivate func adopt(_ path: String, as root: Root, layout: Layout, file: ContentFile) throws {
        try openPartials.handles.withLock { handles in
            let paths = Paths(directory: directory.path, root: root)
            if ContentFile.exists(paths.complete) {
                try ContentFile.remove(path)
                try ContentFile.syncDirectory(paths.directory)
                // Held already, perhaps by no message any more: changed now, so retention
                // leaves it for the message that sends it (`removeUnlessChanged`).
                Self.touch(paths.complete)
                return
            }
            guard try file.size() == Int(layout.totalSize) else {
                throw ContentStoreError(
                    .wrongChunkLength, "An import of \(try file.size()) bytes is not the \(layout.totalSize) of its layout.")
            }
            try file.sync()
            try file.makeReadOnly()
            try ContentFile.rename(path, to: paths.complete)
            if handles[root] == nil {
                try ContentFile.remove(paths.partial)
                try ContentFile.remove(paths.journal)
            }
            try ContentFile.syncDirectory(paths.directory)
        }
    }
}

/// Content being added by this node (`ContentStore.beginImport`): bytes appended in order to
/// a file of its own, named by its root once complete. Dropped (its file deleted) unless
/// finished.
///
/// Not `Sendable`: one caller writes it, on a thread that may block.
public final class ContentImport {
    private let store: ContentStore
    private let path: String
    private let file: ContentFile
    private var length = 0
    private var isDone = false
    /// Bytes appended since the last background sync began, and whether one runs: syncing as
    /// the import goes leaves little for the sync that names it to wait for.
    private var bytesSinceSync = 0
    private let syncing = SyncFlag()

    fileprivate init(store: ContentStore, path: String, file: ContentFile) {
        self.store = store
        self.path = path
        self.file = file
    }

    deinit {
        if !isDone { _ = try? ContentFile.remove(path) }
    }

    /// Bytes appended so far.
    public var byteCount: Int { length }

    /// Appends `bytes` (`.diskFull` when they do not fit). Once `store.syncByteLimit` bytes
    /// were appended since the last, a sync of what is written starts in the background.
    public func append(_ bytes: UnsafeRawBufferPointer) throws {
        try file.write(bytes, at: length)
        length += bytes.count
        bytesSinceSync += bytes.count
        if bytesSinceSync >= store.syncByteLimit, syncing.begin() {
            bytesSinceSync = 0
            let (file, syncing) = (file, syncing)
            store.syncQueue.async {
                // Only to get ahead: `finish` syncs the whole file, and reports a failure.
                try? file.syncData()
                syncing.end()
            }
        }
    }

    /// Whether a background sync runs.
    private final class SyncFlag: Sendable {
        private let running = Mutex(false)

        /// True if none ran (one does now).
        func begin() -> Bool { running.withLock { running in defer { running = true }; return !running } }
        func end() { running.withLock { $0 = false } }
    }

    /// Makes the content complete under `root`: synced, read-only, renamed to `ROOT` and
    /// the directory synced; if the store held it complete already, the import is dropped.
    /// Throws `.wrongChunkLength` unless the bytes appended are `layout.totalSize`.
    public func finish(as root: ContentStore.Root, layout: ContentStore.Layout) throws {
        try store.adopt(path, as: root, layout: layout, file: file)
        isDone = true
    }
}
