import Foundation
import WeftControl

// The files a running node keeps in its home besides its keys (SPEC.md §11).
extension NodeHome {
    /// Held locked (`flock`, exclusive) by the running node: one node per home.
    public var lockFile: URL { directory.appendingPathComponent("node.lock") }
    /// The control socket (SPEC.md §15.1), mode 0600, present while the node runs.
    public var controlSocket: URL { directory.appendingPathComponent(ControlConstants.socketFileName) }
    /// The mesh listener's `host:port` and `\n`, written once the node is ready.
    public var addressFile: URL { directory.appendingPathComponent("node.address") }

    /// Writes the listening address atomically (a temporary file renamed over the old one), so
    /// a reader sees the old address or the new one, never part of one.
    public func writeAddress(_ address: String) throws(NodeHomeError) {
        let temporary = addressFile.path + ".tmp"
        do {
            try Data((address + "\n").utf8).write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, addressFile.path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        } catch {
            unlink(temporary)
            throw .io("cannot write \(addressFile.path): \(error.localizedDescription)")
        }
    }
}

/// The exclusive lock a running node holds on its home (`node.lock`, SPEC.md §11): a second
/// node on the same home sees it held and refuses to start. The kernel drops the lock when the
/// process ends however it ends, so a crash never leaves a home locked.
public final class HomeLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock, or throws one sentence: held by another node, or the file cannot open.
    public init(home: NodeHome) throws(NodeHomeError) {
        let path = home.lockFile.path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io("cannot open the lock file \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let failure = errno
            close(fd)
            if failure == EWOULDBLOCK {
                throw .locked(home.directory.path)
            }
            throw .io("cannot lock \(path): \(String(cString: strerror(failure)))")
        }
        // The holder's process id, for a person looking at the file; the lock is what counts.
        let pid = Array("\(getpid())\n".utf8)
        if ftruncate(fd, 0) == 0 { _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
        descriptor = fd
    }

    deinit { close(descriptor) }
}

extension NodeHomeError {
    static func locked(_ path: String) -> Self {
        Self(kind: .locked, description: "Another weft node is already running on \(path); stop it first or choose another --home.")
    }
}
