#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging
import NIOPosix
import Synchronization
import WeftModel

/// Content added on this node whose every chunk has not yet been sent to a peer, remembered
/// across restarts (SPEC.md §11.2): an empty file `ROOT.upload` in `content/` for each.
///
/// The content service makes the file as content is added, before the content takes its name
/// (`mark`), and removes it once each chunk was sent at least once. A node that starts again
/// reports the content it finds marked as awaiting upload, and counts its chunks sent from
/// there; content held whole without the file is complete, sent whole or fetched here.
/// Without the file a restart could not tell the one from the other.
///
/// `sentWhole` and `forget` take removals in order, from any thread, and apply them in that
/// order on NIO's thread pool; every other call blocks on the file system: call it from a
/// thread pool.
final class PendingUploads: Sendable {
    static let suffix = ".upload"

    /// The `content/` directory.
    let directory: String
    private let logger: Logger
    /// Marks to remove, in order, not removed yet. One waits here only until the thread pool
    /// job submitted with it runs (each job removes all that wait), or a `mark` comes first.
    private let removals = Mutex<[ContentRoot]>([])
    /// Held while marks are made or removed: one at a time, in the order they were asked for.
    private let applying = Mutex<Void>(())

    init(directory: URL, logger: Logger) {
        self.directory = directory.path
        self.logger = logger
    }

    /// Marks `root`, content being added, now (blocks on the file system), after the removals
    /// asked for before.
    func mark(_ root: ContentRoot) throws {
        try applying.withLock { _ in
            removeQueued()
            try add(root)
        }
    }

    /// `root` was sent whole: its mark goes soon, after what was asked for before. Never blocks.
    func sentWhole(_ root: ContentRoot) { enqueueRemoval(root) }

    /// Removes the mark of `root` soon, after what was asked for before (content marked that
    /// is no longer held). Never blocks.
    func forget(_ root: ContentRoot) { enqueueRemoval(root) }

    private func enqueueRemoval(_ root: ContentRoot) {
        removals.withLock { $0.append(root) }
        NIOThreadPool.singleton.submit { _ in self.applyRecorded() }
    }

    /// Removes the marks asked for and not removed yet, in order (blocks on the file system).
    func applyRecorded() {
        applying.withLock { _ in removeQueued() }
    }

    /// With `applying` held.
    private func removeQueued() {
        while let root = removals.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            do {
                try remove(root)
            } catch {
                logger.error("cannot keep what content awaits upload: \(error)")
            }
        }
    }

    /// Marks `root` as not sent whole yet (nothing changes if it is marked already).
    private func add(_ root: ContentRoot) throws {
        let descriptor = open(path(of: root), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.error("create", path(of: root)) }
        close(descriptor)
        try syncDirectory()
    }

    /// `root` was sent whole: its mark goes (durably, so that a restart does not say it
    /// awaits upload again).
    func remove(_ root: ContentRoot) throws {
        guard unlink(path(of: root)) == 0 else {
            if errno == ENOENT { return }
            throw Self.error("remove", path(of: root))
        }
        try syncDirectory()
    }

    /// The contents marked, in no order.
    func roots() throws -> [ContentRoot] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw PendingUploadsError("cannot list \(directory): \(error.localizedDescription)")
        }
        return names.compactMap { name in
            guard name.hasSuffix(Self.suffix) else { return nil }
            return Self.root(hex: name.utf8.dropLast(Self.suffix.utf8.count))
        }
    }

    /// The root whose file name is `hex` (64 lowercase hex digits), or nil.
    static func root(hex: Substring.UTF8View) -> ContentRoot? {
        guard hex.count == 2 * ContentRoot.byteCount else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ContentRoot.byteCount)
        var high: UInt8?
        for digit in hex {
            let nibble: UInt8
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
            default: return nil
            }
            if let first = high {
                bytes.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return ContentRoot(bytes: bytes)
    }

    private func path(of root: ContentRoot) -> String { directory + "/" + root.hex + Self.suffix }

    private func syncDirectory() throws {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Self.error("open", directory) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Self.error("sync", directory) }
    }

    private static func error(_ call: String, _ path: String) -> PendingUploadsError {
        PendingUploadsError("cannot \(call) \(path): \(String(cString: strerror(errno)))")
    }
}

/// Why a mark of `PendingUploads` could not be made, removed or read.
struct PendingUploadsError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
