import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ConvLeaveCommand: AsyncCommand {
    static let configuration = CommandConfiguration(commandName: "leave", abstract: "Leave a conversation (remove yourself).")

    @OptionGroup var options: NodeOptions
    @Argument(help: "The conversation.") var conversation: String

    func execute() async throws {
        let id = try parseConversation(conversation)
        try await options.withNode { node in try await node.perform(.leave(id)) }
        try report(["conversation": id.hex, "left": true], "left \(id.hex)", json: options.json)
    }
}
