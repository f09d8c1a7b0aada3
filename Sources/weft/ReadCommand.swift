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
        if all {
            let conversation = try parseConversation(identifier)
            try await options.withNode { node in try await node.perform(.markAllRead(conversation)) }
            try report(["read": "all", "conversation": conversation.hex], "marked every message of \(conversation.hex) read", json: options.json)
        } else {
            let message = try parseMessage(identifier)
            try await options.withNode { node in try await node.perform(.markRead(message)) }
            try report(["read": "message", "message": message.hex], "marked \(message.hex) read", json: options.json)
        }
    }
}
