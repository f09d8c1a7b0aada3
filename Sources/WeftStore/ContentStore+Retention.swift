import Foundation

// Removing content no held message refers to any more (SPEC.md §11.2 "Removing", §13.8). The
// store does not know which messages those are: the caller asks the database, then removes
// here. A content whose files changed lately stays whatever the caller found, so that content
// just added survives until the message that sends it is stored (the caller's look at the
// database and the removal are not one transaction).

extension ContentStore {
    /// What `removeUnlessChanged(_:since:)` did.
    public enum Removal: Sendable, Hashable {
        /// Its files are gone.
        case removed
        /// A file of it changed at or after the cutoff: it stays.
        case changedLately
        /// Nothing of it was held.
        case absent
    }

    /// Every root the store holds anything of: a complete content, a partial one (its partial
    /// file or journal), or only a manifest (an import that failed after writing it, or a
    /// download removed while its manifest was being written).
    public func heldRoots() throws -> Set<Root> {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw ContentStoreError(.fileSystem, "Cannot list \(directory.path): \(error.localizedDescription)")
        }
        var roots: Set<Root> = []
        for name in names {
            let parts = name.split(separator: ".", maxSplits: 1)
            guard let root = parts.first.flatMap({ Root(hex: $0) }) else { continue }
            switch parts.count == 2 ? parts[1] : nil {
            case nil, "partial", "journal", "manifest", "frames": roots.insert(root)
            default: continue
            }
        }
        return roots
    }

    /// When a file of the content named `root` last changed (the latest status change time of
    /// its names: written, renamed, made read-only, touched), or nil if none exists.
    public func lastChange(of root: Root) throws -> Date? {
        try Self.lastChange(of: Paths(directory: directory.path, root: root))
    }

    /// Removes the content named `root` as `remove(_:)` does (its names, then the
    /// directory synced; an open `PartialContent` of it is closed without flushing, and whoever
    /// holds it gets `.closed`), unless one of its files changed at or after `cutoff`.
    ///
    /// The check and the removal hold the lock that opening and naming an import take, so
    /// content opened or imported meanwhile is either seen changed (it stays) or made afresh
    /// after the removal.
    public func removeUnlessChanged(_ root: Root, since cutoff: Date) throws -> Removal {
        try openPartials.handles.withLock { handles in
            let paths = Paths(directory: directory.path, root: root)
            let changed = try Self.lastChange(of: paths)
            guard changed != nil || handles[root] != nil else { return .absent }
            if let changed, changed >= cutoff { return .changedLately }
            handles.removeValue(forKey: root)?.discard()
            forgetFrames(of: root)
            for path in paths.all { try ContentFile.remove(path) }
            try ContentFile.syncDirectory(paths.directory)
            return .removed
        }
    }

    /// Marks the complete content at `path` changed now (its times set to now): an import of
    /// content held already, which a message is about to refer to, so retention keeps it
    /// meanwhile. A failure is not the import's: it leaves the content as it was.
    static func touch(_ path: String) {
        _ = utimensat(AT_FDCWD, path, nil, AT_SYMLINK_NOFOLLOW)
    }

    private static func lastChange(of paths: Paths) throws -> Date? {
        var latest: Date?
        for path in paths.all {
            var info = stat()
            guard lstat(path, &info) == 0 else {
                if errno == ENOENT { continue }
                throw ContentFile.error("stat", path, errno)
            }
            // The status change time moves with every write, rename, mode change and touch.
            let changed = Date(
                timeIntervalSince1970: TimeInterval(info.st_ctim.tv_sec) + TimeInterval(info.st_ctim.tv_nsec) / 1_000_000_000)
            latest = max(latest ?? changed, changed)
        }
        return latest
    }
}
