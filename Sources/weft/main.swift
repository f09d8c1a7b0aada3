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
    warn(WeftCommand.message(for: error))
    exit(code.rawValue)
}
