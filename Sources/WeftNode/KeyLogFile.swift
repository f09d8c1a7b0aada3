import Foundation
import Logging
import Synchronization
import WeftWire

/// A key log kept in a file (SPEC.md §18), as `WEFT_KEYLOG=PATH weft node` asks: each
/// connection's lines appended whole, in one `write`, so lines of connections that split their
/// keys at once never interleave, and several nodes may share one file. The file is created
/// readable by its owner only; an existing one is appended to.
public final class KeyLogFile: KeyLog {
    /// The environment variable that names the file.
    public static let environmentVariable = "WEFT_KEYLOG"

    public let path: String
    private let descriptor: Int32
    private let logger: Logger
    /// Whether a failed write was reported (once: the node goes on without its key log).
    private let reportedFailure = Mutex(false)

    /// Opens (or creates, mode 0600) the file at `path` for appending.
    /// - Throws: `KeyLogFileError` in one sentence when it cannot be opened.
    public init(path: String, logger: Logger = Logger(label: "weft.keylog")) throws {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw KeyLogFileError(description: "Cannot open the key log \(path): \(String(cString: strerror(errno))).")
        }
        self.path = path
        self.descriptor = descriptor
        self.logger = logger
    }

    deinit { close(descriptor) }

    public func record(_ entry: KeyLogEntry) {
        let text = Array(entry.lines.map { $0 + "\n" }.joined().utf8)
        var failure: Int32?
        text.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count, let base = bytes.baseAddress {
                let count = write(descriptor, base + done, bytes.count - done)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    failure = count < 0 ? errno : EIO
                    return
                }
                done += count
            }
        }
        guard let failure, !reportedFailure.withLock({ reported in defer { reported = true }; return reported }) else { return }
        logger.error("cannot write the key log \(path): \(String(cString: strerror(failure))); connections go on without it")
    }
}

/// Why a key log file cannot be opened.
public struct KeyLogFileError: Error, CustomStringConvertible {
    public let description: String
}
