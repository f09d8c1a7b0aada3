import Foundation
import WeftCrypto

/// Where a passphrase comes from: `--passphrase-file`, then `WEFT_PASSPHRASE`, then a prompt
/// without echo when standard input is a terminal (SPEC.md §10, "Passphrase bytes").
///
/// Every path reads straight into `SecureBytes`, which wipes its memory when freed: the
/// passphrase never passes through a `String`, `Data` or array that would outlive the key
/// derivation unwiped.
enum PassphraseSource {
    /// The longest passphrase accepted, in bytes (after a file's line ending is removed).
    static let maxByteCount = 1024

    /// Reads the passphrase, or throws one sentence saying how to give one.
    static func read(file: String?, confirm: Bool) throws -> SecureBytes {
        if let file { return try nonEmpty(readFile(file)) }
        if let fromEnvironment = try readEnvironment("WEFT_PASSPHRASE") { return try nonEmpty(fromEnvironment) }
        guard isatty(STDIN_FILENO) == 1 else {
            throw CLIError(
                "The identity needs a passphrase: give --passphrase-file, set WEFT_PASSPHRASE, or run on a terminal.")
        }
        let first = try prompt("Passphrase: ")
        if confirm {
            let second = try prompt("Passphrase again: ")
            guard first == second else { throw CLIError("The two passphrases differ.") }
        }
        return try nonEmpty(first)
    }

    /// A passphrase file's bytes, less one line ending: a final LF, then a CR before it.
    static func readFile(_ path: String) throws -> SecureBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CLIError("Cannot read the passphrase file \(path): \(String(cString: strerror(errno))).") }
        defer { close(fd) }
        // Room for the longest passphrase, its CR LF, and one byte more to notice a longer file.
        var tooLong = false
        var failed: Int32 = 0
        let passphrase = SecureBytes(capacity: maxByteCount + 3) { buffer in
            var length = 0
            while length < buffer.count {
                let got = Foundation.read(fd, buffer.baseAddress! + length, buffer.count - length)
                if got < 0 && errno == EINTR { continue }
                if got < 0 { failed = errno; return 0 }
                if got == 0 { break }
                length += got
            }
            if length > 0 && buffer[length - 1] == UInt8(ascii: "\n") { length -= 1 }
            if length > 0 && buffer[length - 1] == UInt8(ascii: "\r") { length -= 1 }
            tooLong = length > maxByteCount
            return tooLong ? 0 : length
        }
        if failed != 0 { throw CLIError("Cannot read the passphrase file \(path): \(String(cString: strerror(failed))).") }
        if tooLong { throw CLIError("The passphrase file \(path) holds more than \(maxByteCount) bytes.") }
        return passphrase
    }

    /// An environment variable's bytes exactly (nothing trimmed), copied from the environment
    /// block itself rather than through `ProcessInfo`'s strings.
    private static func readEnvironment(_ name: String) throws -> SecureBytes? {
        guard let value = getenv(name) else { return nil }
        let length = strlen(value)
        guard length <= maxByteCount else { throw CLIError("\(name) holds more than \(maxByteCount) bytes.") }
        return SecureBytes(copying: UnsafeRawBufferPointer(start: value, count: length))
    }

    private static func nonEmpty(_ passphrase: SecureBytes) throws -> SecureBytes {
        guard passphrase.count > 0 else {
            throw CLIError("The passphrase is empty; use --no-passphrase to store the key unprotected.")
        }
        return passphrase
    }

    /// Reads one line from the terminal with echo turned off; a CR before the LF is dropped.
    private static func prompt(_ text: String) throws -> SecureBytes {
        _ = StandardOutput.write(text, to: STDERR_FILENO)
        var original = termios()
        tcgetattr(STDIN_FILENO, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
            _ = StandardOutput.write("\n", to: STDERR_FILENO)
        }
        var tooLong = false
        let line = SecureBytes(capacity: maxByteCount + 1) { buffer in
            var length = 0
            var byte: UInt8 = 0
            while Foundation.read(STDIN_FILENO, &byte, 1) == 1 && byte != UInt8(ascii: "\n") {
                if length < buffer.count { buffer[length] = byte }
                length += 1
            }
            byte = 0
            if length > 0 && length <= buffer.count && buffer[length - 1] == UInt8(ascii: "\r") { length -= 1 }
            tooLong = length > maxByteCount
            return tooLong ? 0 : length
        }
        if tooLong { throw CLIError("The passphrase is longer than \(maxByteCount) bytes.") }
        return line
    }
}
