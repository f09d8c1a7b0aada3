import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ReadCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "read", abstract: "Mark a message read, or with --all every message of a conversation.")

    @OptionGroup var options: NodeOptions

    @Flag(help: "Mark every message of the conversation read (the argument is a conversation).")
    var all = false

    @Argument(help: "The message (or with --all, the conversation).") var identifier: String

    func execute() async throws {
        let request: ControlRequest = all ? .markAllRead(try parseConversation(identifier)) : .markRead(try parseMessage(identifier))
        try await options.withNode { node in try await node.perform(request) }
    }
}
