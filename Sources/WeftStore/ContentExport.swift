import Foundation
import Synchronization

/// Content copied out to a file of the user's (`weft download --out PATH`) while it arrives:
/// each chunk once it is verified, so that when the content completes its copy is all but
/// made, instead of being made then in one pass over the whole file. The copy is the user's:
/// a file of its own, writable, that later changes to it leave the store's content alone.
///
/// The copy is written into a temporary file beside the target (`.NAME.weft-download`, sized
/// to the content) and renamed over the target once whole, so the target is never a partial
/// file. Copies run inside the kernel where the file system allows (`copy_file_range`).
///
/// One caller at a time (the download that asked for it): `copyVerified` as progress comes,
/// then `finish` once the content is complete, or `abandon`.
public final class ContentExport: Sendable {
    /// The file the copy is named once whole.
    public let target: String
    /// The content copied, and how it is cut into chunks.
    public let root: ContentStore.Root
    public let layout: ContentStore.Layout

    private let store: ContentStore
    private let temporary: String
    private let state: Mutex<State>

    private struct State {
        /// Nil once finished or abandoned.
        var file: ContentFile?
        /// The chunks in the temporary file already.
        var copied: VerifiedChunks
    }

    /// Creates the temporary file for a copy of `root` from `store` to `target` (replacing a
    /// temporary file an earlier copy left there).
    /// - Throws: `ContentStoreError` when the temporary file cannot be made (no such directory,
    ///   no permission, the disk full).
    public init(_ root: ContentStore.Root, layout: ContentStore.Layout, from store: ContentStore, to target: String) throws {
        self.root = root
        self.layout = layout
        self.store = store
        self.target = target
        let url = URL(fileURLWithPath: target)
        temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).weft-download").path
        try ContentFile.remove(temporary)
        let file = try ContentFile.create(temporary)
        do {
            // Chunks arrive in any order: each is copied to its own place.
            try file.truncate(to: Int(layout.totalSize))
        } catch {
            _ = try? ContentFile.remove(temporary)
            throw error
        }
        state = Mutex(State(file: file, copied: VerifiedChunks(chunkCount: layout.chunkCountValue)))
    }

    /// How many chunks are in the copy so far.
    public var copiedChunkCount: Int { state.withLock { $0.copied.count } }

    /// Copies the chunks the store has verified since the last call (none if the content is
    /// not open in the store: it may be complete, for `finish`), each run of neighbours at once.
    /// Blocks on the disk.
    public func copyVerified() throws {
        guard let verified = store.verifiedChunks(of: root) else { return }
        try copy { verified.contains($0) }
    }

    /// Copies whatever is not in the copy yet from the complete content, makes the copy
    /// readable by others (mode 0644) and renames it over `target`. Blocks on the disk.
    /// - Throws: `.notHeld` unless the store holds the content complete, or what the file
    ///   system said; the temporary file is then removed.
    public func finish() throws {
        do {
            try copy { _ in true }
            guard let file = state.withLock({ $0.file }) else { throw closed() }
            guard fchmod(file.descriptor, 0o644) == 0 else { throw ContentFile.error("chmod", temporary, errno) }
            try ContentFile.rename(temporary, to: target)
            state.withLock { $0.file = nil }
        } catch {
            abandon()
            throw error
        }
    }

    /// Removes the temporary file (the target is left as it was). Does nothing once finished.
    public func abandon() {
        let file = state.withLock { state in
            defer { state.file = nil }
            return state.file
        }
        if file != nil { _ = try? ContentFile.remove(temporary) }
    }

    /// Copies each run of chunks `wanted` says and the copy lacks.
    private func copy(_ wanted: (Int) -> Bool) throws {
        let (file, copied) = state.withLock { ($0.file, $0.copied) }
        guard let file else { throw closed() }
        var index = 0
        while index < layout.chunkCountValue {
            guard !copied.contains(index), wanted(index) else {
                index += 1
                continue
            }
            var end = index + 1
            while end < layout.chunkCountValue, !copied.contains(end), wanted(end) { end += 1 }
            try store.copy(root, layout: layout, chunks: index..<end, to: file)
            state.withLock { state in
                for chunk in index..<end { state.copied.insert(chunk) }
            }
            index = end
        }
    }

    private func closed() -> ContentStoreError {
        ContentStoreError(.closed, "The copy of content \(root) to \(target) is over.")
    }
}
