import Foundation
import Synchronization

/// Rich content on disk (SPEC.md §11.2): large message parts, each named by its 32-byte root and
/// split into chunks of a power-of-two size, held in the `content/` directory of the node's
/// home. Complete content is one immutable file named by the root in hex; content still
/// arriving is a pre-sized `.partial` file and a `.journal` of the chunks verified so far, so a
/// transfer resumes where it stopped, after a crash too.
///
/// The transfer driver verifies each chunk (its hash against the root) and hands it to
/// `PartialContent.write`; sessions serving peers `read` verified chunks. Content is
/// addressed by its root: the same root is one file, and one `PartialContent` while open.
///
/// Every call blocks on the file system (and `flush` and `complete` wait for the disk): call it
/// from a thread pool, never from the cooperative pool. A store in one
/// process owns its directory; the node's `node.lock` keeps a second node out of the home.
public final class ContentStore: Sendable {
    /// The directory in the node's home that holds the content.
    public static let directoryName = "content"
    /// Chunk sizes the store holds: 2^10 (1 KiB) to 2^24 (16 MiB) bytes.
    public static let chunkLogRange: ClosedRange<UInt8> = 10...24
    /// The most chunks one content may have (2^24; its `VerifiedChunks` is then 2 MiB).
    public static let maxChunkCount = 1 << 24
    /// The most bytes one `read` returns (16 MiB, one chunk of the largest size).
    public static let maxReadByteCount = 16 << 20
    /// The default chunk bytes written before a partial content syncs in the background (16 MiB).
    public static let defaultSyncByteLimit = 16 << 20

    /// The `content/` directory.
    public let directory: URL
    /// Chunk bytes a `PartialContent` writes before it syncs them in the background.
    public let syncByteLimit: Int
    let openPartials = OpenPartials()
    let openFrames = OpenFrames()
    /// Where partial contents sync in the background: one thread, so the disk gets one sync
    /// at a time and the thread pool that verifies chunks never waits for it.
    let syncQueue = DispatchQueue(label: "weft.content-sync")

    /// Opens the content store in a node's home, creating `content/` (mode 0700) if missing.
    /// - Parameters:
    ///   - directory: the node's home, where the store's `weft.sqlite` lives.
    ///   - syncByteLimit: chunk bytes a partial content writes before a background sync makes
    ///     them durable against a power loss (a process that dies keeps them anyway).
    public init(directory: URL, syncByteLimit: Int = ContentStore.defaultSyncByteLimit) throws {
        self.directory = directory.appendingPathComponent(Self.directoryName)
        self.syncByteLimit = syncByteLimit
        do {
            try FileManager.default.createDirectory(
                at: self.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ContentStoreError(.fileSystem, "Cannot create the content directory \(self.directory.path): \(error.localizedDescription)")
        }
    }

    // MARK: - Opening

    /// What `open` found.
    public enum Opened: Sendable {
        /// The content is complete on disk: read it, nothing to write.
        case complete
        /// The content is partial (perhaps new, with no chunk verified): write its missing chunks.
        case partial(PartialContent)
    }

    /// Opens the content named `root` with `layout`, creating its partial file (sized to the
    /// whole content, its blocks reserved where the file system can) and journal if nothing is
    /// held. A partial content already held is resumed from its journal (`recovery` on the
    /// result says what opening found); one already open in this store is returned as is.
    ///
    /// Throws `.conflictingLayout` if the root is held with another layout, `.diskFull` if the
    /// partial file does not fit (nothing is then left behind).
    public func open(_ root: Root, layout: Layout) throws -> Opened {
        try openPartials.handles.withLock { handles in
            if let handle = handles[root] {
                guard handle.layout == layout else { throw conflicting(root, held: handle.layout, asked: layout) }
                return .partial(handle)
            }
            let paths = Paths(directory: directory.path, root: root)
            if try openComplete(root, layout: layout) != nil {
                // A crash after the rename that completed it may have left its journal.
                let leftovers = try [paths.partial, paths.journal].filter { try ContentFile.remove($0) }
                if !leftovers.isEmpty { try ContentFile.syncDirectory(paths.directory) }
                return .complete
            }
            let handle = try PartialContent(
                root: root, layout: layout, paths: paths, syncByteLimit: syncByteLimit, syncQueue: syncQueue,
                onClose: { [weak openPartials] handle in openPartials?.forget(handle) })
            handles[root] = handle
            return .partial(handle)
        }
    }

    // MARK: - Reading

    /// The bytes of chunks `chunks` of the content named `root`, concatenated (the last chunk
    /// may be shorter), from the complete file or, for content still arriving, if every one of
    /// them is verified (`.chunkMissing` if not). At most `maxReadByteCount` bytes.
    public func read(_ root: Root, layout: Layout, chunks: Range<Int>) throws -> [UInt8] {
        let byteCount = try layout.checkRead(chunks, of: root)
        return try [UInt8](unsafeUninitializedCapacity: byteCount) { bytes, initialized in
            try read(root, layout: layout, chunks: chunks, into: UnsafeMutableRawBufferPointer(bytes))
            initialized = byteCount
        }
    }

    /// Reads chunks `chunks` into the first bytes of `buffer`, which has room for them (else
    /// `.readTooLarge`), as `read(_:layout:chunks:)` does: a server reads a chunk straight into
    /// the message that carries it.
    public func read(_ root: Root, layout: Layout, chunks: Range<Int>, into buffer: UnsafeMutableRawBufferPointer) throws {
        let byteCount = try layout.checkRead(chunks, of: root, into: buffer)
        if let handle = openPartials.handles.withLock({ $0[root] }) {
            guard handle.layout == layout else { throw conflicting(root, held: handle.layout, asked: layout) }
            do {
                return try handle.read(chunks: chunks, into: buffer)
            } catch let error as ContentStoreError where error.code == .closed {
                // Completed or closed meanwhile: read what is on disk now.
            }
        }
        let paths = Paths(directory: directory.path, root: root)
        if let file = try openComplete(root, layout: layout) {
            return try file.read(
                exactly: UnsafeMutableRawBufferPointer(rebasing: buffer.prefix(byteCount)), at: layout.offset(ofChunk: chunks.lowerBound))
        }
        guard ContentFile.exists(paths.journal) else {
            throw ContentStoreError(.notHeld, "Content \(root) is not held.")
        }
        switch try open(root, layout: layout) {
        case .complete: return try read(root, layout: layout, chunks: chunks, into: buffer)
        case .partial(let handle): return try handle.read(chunks: chunks, into: buffer)
        }
    }

    /// Copies chunks `chunks` of the content named `root` to the same place in `output`, from
    /// the complete file or, for content still arriving, if every one of them is verified
    /// (`.chunkMissing` if not; `.notHeld` if the content is neither open nor complete).
    func copy(_ root: Root, layout: Layout, chunks: Range<Int>, to output: ContentFile) throws {
        if let handle = openPartials.handles.withLock({ $0[root] }) {
            guard handle.layout == layout else { throw conflicting(root, held: handle.layout, asked: layout) }
            do {
                return try handle.copy(chunks: chunks, to: output)
            } catch let error as ContentStoreError where error.code == .closed {
                // Completed or closed meanwhile: copy from what is on disk now.
            }
        }
        let bytes = try layout.bytes(ofChunks: chunks, of: root)
        guard let file = try openComplete(root, layout: layout) else {
            throw ContentStoreError(.notHeld, "Content \(root) is not held complete, and not open.")
        }
        try file.copy(count: bytes.count, from: bytes.lowerBound, to: output, at: bytes.lowerBound)
    }

    /// The complete file of the content named `root`, if the store holds it complete; throws
    /// `.conflictingLayout` if it does with another size than `layout`'s.
    private func openComplete(_ root: Root, layout: Layout) throws -> ContentFile? {
        guard let file = try ContentFile.openForReading(Paths(directory: directory.path, root: root).complete) else { return nil }
        let size = try file.size()
        guard size == Int(layout.totalSize) else {
            throw ContentStoreError(
                .conflictingLayout, "Content \(root) is held complete with \(size) bytes, not the \(layout.totalSize) asked for.")
        }
        return file
    }

    // MARK: - What is held

    /// How much of a content the store holds.
    public enum Holding: Sendable, Hashable {
        case absent
        /// Some chunks, perhaps none, in a partial file and its journal (or one of them).
        case partial
        case complete
    }

    /// How much of the content named `root` the store holds.
    public func holding(_ root: Root) -> Holding {
        let paths = Paths(directory: directory.path, root: root)
        if ContentFile.exists(paths.complete) { return .complete }
        if openPartials.handles.withLock({ $0[root] }) != nil || ContentFile.exists(paths.journal) || ContentFile.exists(paths.partial) {
            return .partial
        }
        return .absent
    }

    /// Every content held, complete or partial (for retention, and to resume transfers). A
    /// partial file without its journal (a crash while it was created) counts as partial, so
    /// that retention finds it.
    public func roots() throws -> [Root: Holding] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw ContentStoreError(.fileSystem, "Cannot list \(directory.path): \(error.localizedDescription)")
        }
        var held: [Root: Holding] = [:]
        for name in names {
            let parts = name.split(separator: ".", maxSplits: 1)
            guard let root = parts.first.flatMap({ Root(hex: $0) }) else { continue }
            switch parts.count == 2 ? parts[1] : nil {
            case nil: held[root] = .complete
            case "journal" where held[root] != .complete, "partial" where held[root] != .complete: held[root] = .partial
            default: continue
            }
        }
        return held
    }

    // MARK: - Removing

    /// Removes the content named `root`, complete or partial, its manifest and its frames (closing its `PartialContent`
    /// without flushing: whoever still holds it gets `.closed`). False if nothing was held.
    @discardableResult
    public func remove(_ root: Root) throws -> Bool {
        try openPartials.handles.withLock { handles in
            let handle = handles.removeValue(forKey: root)
            handle?.discard()
            let paths = Paths(directory: directory.path, root: root)
            var removed = handle != nil
            forgetFrames(of: root)
            for path in paths.all where try ContentFile.remove(path) {
                removed = true
            }
            if removed { try ContentFile.syncDirectory(paths.directory) }
            return removed
        }
    }

    /// Flushes and closes every open `PartialContent` (when the node stops). Every one is
    /// closed even if some fail; the first failure is thrown.
    public func closeAll() throws {
        let handles = openPartials.handles.withLock { handles in
            defer { handles = [:] }
            return Array(handles.values)
        }
        var failure: (any Error)?
        for handle in handles {
            do { try handle.close() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    private func conflicting(_ root: Root, held: Layout, asked: Layout) -> ContentStoreError {
        ContentStoreError(.conflictingLayout, "Content \(root) is held as \(held), not \(asked).")
    }
}

// MARK: - Names

extension ContentStore {
    /// The names of one content's files (SPEC.md §11.2).
    struct Paths: Sendable {
        let directory: String
        /// `content/<root hex>`: the complete content.
        let complete: String
        /// `content/<root hex>.partial`: the content arriving, sized to the whole.
        let partial: String
        /// `content/<root hex>.journal`: the chunks of the partial file that are verified.
        let journal: String
        /// `content/<root hex>.manifest`: the content's manifest (SPEC.md §17.4).
        let manifest: String
        /// `content/<root hex>.frames`: each chunk's frame as it travels (`ContentFrames`).
        let frames: String
        /// `content/<root hex>.upload`: content added here not yet sent whole (kept by the
        /// node's content service).
        let upload: String

        /// Every name of the content: what removing it deletes.
        var all: [String] { [complete, journal, partial, manifest, frames, upload] }

        init(directory: String, root: Root) {
            self.directory = directory
            complete = directory + "/" + root.hex
            partial = complete + ".partial"
            journal = complete + ".journal"
            manifest = complete + ".manifest"
            frames = complete + ".frames"
            upload = complete + ".upload"
        }
    }

    /// The open partial contents, by root: one `PartialContent` a root.
    final class OpenPartials: Sendable {
        let handles = Mutex<[Root: PartialContent]>([:])

        /// Drops `handle` once it closed or completed (not a newer one of the same root).
        func forget(_ handle: PartialContent) {
            handles.withLock { if $0[handle.root] === handle { $0[handle.root] = nil } }
        }
    }
}
