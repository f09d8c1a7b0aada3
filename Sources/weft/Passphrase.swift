import Foundation
import WeftCrypto

/// Where a passphrase comes from: `--passphrase-file`, then `WEFT_PASSPHRASE`, then a prompt
/// without echo when standard input is a terminal.
enum PassphraseSource {
    /// Reads the passphrase, or throws one sentence saying how to give one.
    static func read(file: String?, confirm: Bool) throws -> SecureBytes {
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw CLIError("Cannot read the passphrase file \(file).")
            }
            var bytes = [UInt8](data)
            defer { for i in bytes.indices { bytes[i] = 0 } }
            // One trailing newline is the file's, not the passphrase's.
            if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
            return try nonEmpty(SecureBytes(copying: bytes))
        }
        if let fromEnvironment = ProcessInfo.processInfo.environment["WEFT_PASSPHRASE"] {
            return try nonEmpty(SecureBytes(copying: Array(fromEnvironment.utf8)))
        }
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

    private static func nonEmpty(_ passphrase: SecureBytes) throws -> SecureBytes {
        guard passphrase.count > 0 else {
            throw CLIError("The passphrase is empty; use --no-passphrase to store the key unprotected.")
        }
        return passphrase
    }

    /// Reads one line from the terminal with echo turned off.
    private static func prompt(_ text: String) throws -> SecureBytes {
        FileHandle.standardError.write(Data(text.utf8))
        var original = termios()
        tcgetattr(STDIN_FILENO, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        var bytes: [UInt8] = []
        defer { for i in bytes.indices { bytes[i] = 0 } }
        var byte: UInt8 = 0
        while Foundation.read(STDIN_FILENO, &byte, 1) == 1 && byte != UInt8(ascii: "\n") {
            bytes.append(byte)
        }
        return SecureBytes(copying: bytes)
    }
}
