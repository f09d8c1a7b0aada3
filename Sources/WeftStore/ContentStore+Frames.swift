import Foundation
import Synchronization

// The chunk frames kept beside each content (`ROOT.frames`, SPEC.md §11.2): opened once and
// kept open for the servers and the downloads that use them, a bounded number at a time.

extension ContentStore {
    /// The frames kept of `root` (a content of `chunkCount` chunks), opened or, if `create`,
    /// created; nil if there are none and `create` is false. Kept open for later calls.
    public func frames(of root: Root, chunkCount: Int, create: Bool) throws -> ContentFrames? {
        // Opened under the lock: chunks verified at once on two threads must not both open the
        // file, or each would start it afresh or append at the same place, losing a frame.
        try openFrames.files.withLock { files in
            if let open = files[root], open.chunkCount == chunkCount { return open }
            let paths = Paths(directory: directory.path, root: root)
            guard let frames = try ContentFrames.open(paths.frames, root: root, chunkCount: chunkCount, create: create) else { return nil }
            if files.count >= OpenFrames.limit { files.removeAll() }
            files[root] = frames
            return frames
        }
    }

    /// Forgets the open frames of `root` (its files are being removed or replaced).
    func forgetFrames(of root: Root) {
        _ = openFrames.files.withLock { $0.removeValue(forKey: root) }
    }

    /// The frames files open, by root (a file a served or arriving content; closed once
    /// forgotten and no reader holds it).
    final class OpenFrames: Sendable {
        static let limit = 256
        let files = Mutex<[Root: ContentFrames]>([:])
    }
}
