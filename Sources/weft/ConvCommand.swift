import ArgumentParser

/// `weft conv ...`: conversations on the running node.
struct ConvCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conv",
        abstract: "Create, change and list conversations on the running node.",
        subcommands: [
            ConvNewCommand.self, ConvAddCommand.self, ConvRemoveCommand.self, ConvLeaveCommand.self,
            ConvListCommand.self, ConvShowCommand.self,
        ]
    )
}
