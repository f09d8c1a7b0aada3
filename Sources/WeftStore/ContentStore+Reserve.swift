import Foundation

// Content wanted on demand (SPEC.md §11.2): its journal's header is written at once, so that a
// restart wants it again, whether or not its download had started.

extension ContentStore {
    /// Writes the journal header of the content named `root` with `layout` (synced, and the
    /// directory synced), unless anything of it is held or open: what opening writes first,
    /// without the partial file. A node that starts resumes every content with a journal.
    /// Returns whether it wrote one.
    @discardableResult
    public func reserve(_ root: Root, layout: Layout) throws -> Bool {
        try openPartials.handles.withLock { handles in
            let paths = Paths(directory: directory.path, root: root)
            guard handles[root] == nil, !ContentFile.exists(paths.complete), !ContentFile.exists(paths.journal),
                !ContentFile.exists(paths.partial)
            else { return false }
            let journal = try ContentFile.create(paths.journal)
            do {
                try journal.write(ChunkJournal.header(root: root, layout: layout), at: 0)
                try journal.syncData()
                try ContentFile.syncDirectory(paths.directory)
            } catch {
                _ = try? ContentFile.remove(paths.journal)
                throw error
            }
            return true
        }
    }
}
