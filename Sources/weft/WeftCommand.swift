import ArgumentParser
import Foundation
import Logging
import WeftNode

struct WeftCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "weft",
        abstract: "A peer-to-peer messaging mesh node.",
        version: "weft \(weftVersion) (protocol: SPEC.md §1–18)",
        subcommands: [
            InitCommand.self, IdCommand.self, NodeCommand.self, ConvCommand.self, SendCommand.self, MessagesCommand.self,
            ReadCommand.self, DownloadCommand.self, WaitCommand.self, WatchCommand.self, PeersCommand.self, ConnectCommand.self, DisconnectCommand.self,
            StatusCommand.self, DemoCommand.self, DumpCommand.self,
        ]
    )
}

/// This build's version, as `weft --version` prints it.
let weftVersion = "0.3.0"

/// A command whose work is asynchronous. (ArgumentParser's own async entry point would add
/// a usage block to every error; `main.swift` calls `execute()` instead.)
protocol AsyncCommand: ParsableCommand {
    func execute() async throws
}

/// Options every command that touches a node home shares.
struct HomeOptions: ParsableArguments {
    @Option(name: .long, help: "The node's home directory (default: $WEFT_HOME, else ~/.weft).")
    var home: String?

    var nodeHome: NodeHome { NodeHome.resolve(home) }
}

/// A failure the user can act on, said in one sentence.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Sends log lines to standard error at the chosen level.
func bootstrapLogging(level: Logger.Level) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

