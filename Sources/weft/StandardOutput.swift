import Foundation

/// Writes to standard output and standard error with write(2).
///
/// Foundation's `FileHandle.write(_:)` traps when the write fails, and the commonest failure
/// is an ordinary one: the reader went away (`weft msgs … | head -1` closes the pipe after one
/// line). `main.swift` ignores SIGPIPE, so such a write fails with EPIPE instead of killing
/// the process, and the command ends quietly with status 0, as `ls | head` is expected to.
enum StandardOutput {
    /// Writes all of `text` to `descriptor`; the errno of a failed write, nil once written.
    static func write(_ text: String, to descriptor: Int32) -> Int32? {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            bytes = bytes.dropFirst(written)
        }
        return nil
    }
}

/// Prints a line to standard output (unbuffered, so a parent process sees it at once). If
/// nobody reads standard output any more, the command is over: it exits quietly.
func say(_ line: String) {
    guard let failure = StandardOutput.write(line + "\n", to: STDOUT_FILENO) else { return }
    if failure == EPIPE { exit(0) }
    _ = StandardOutput.write("weft: cannot write to standard output: \(String(cString: strerror(failure))).\n", to: STDERR_FILENO)
    exit(1)
}

/// Prints a line to standard error, after `weft: `; a closed standard error is ignored.
func warn(_ line: String) {
    _ = StandardOutput.write("weft: " + line + "\n", to: STDERR_FILENO)
}
