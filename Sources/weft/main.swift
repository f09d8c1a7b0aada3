import ArgumentParser
import Foundation

// A custom entry point, so that every failure prints one sentence (`weft: ...`) and exits
// non-zero, without ArgumentParser's usage block after it; --help still prints help.
// A reader that goes away makes writes fail with EPIPE (handled by `say`), not kill weft.
signal(SIGPIPE, SIG_IGN)
if let unknown = CommandSuggestion.unknownCommand(in: Array(CommandLine.arguments.dropFirst())) {
    warn(unknown)
    exit(64)  // EX_USAGE, as ArgumentParser's own usage errors
}
do {
    var command = try WeftCommand.parseAsRoot()
    if let asyncCommand = command as? AsyncCommand {
        try await asyncCommand.execute()
    } else {
        try command.run()
    }
} catch {
    let code = WeftCommand.exitCode(for: error)
    if code == .success {
        WeftCommand.exit(withError: error)
    }
    let sentence = WeftCommand.message(for: error)
    // With --json, the error is a JSON object on standard error, as the output is on standard output.
    if CommandLine.arguments.contains("--json"),
        let data = try? JSONSerialization.data(withJSONObject: ["error": sentence], options: [.withoutEscapingSlashes])
    {
        _ = StandardOutput.write(String(decoding: data, as: UTF8.self) + "\n", to: STDERR_FILENO)
    } else {
        warn(sentence)
    }
    exit(code.rawValue)
}
