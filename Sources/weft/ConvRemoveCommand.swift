import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ConvRemoveCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove participants from a conversation; they get nothing posted after.")

    @OptionGroup var options: NodeOptions
    @Argument(help: "The conversation.") var conversation: String
    @Argument(help: "User identifiers, or display names this node has met.") var participants: [String]

    func execute() async throws {
        let id = try parseConversation(conversation)
        let users = try await options.withNode { node in
            let users = try await resolveParticipants(participants) { try await node.users() }
            try await node.perform(.removeParticipants(users, from: id))
            return users
        }
        try report(
            ["conversation": id.hex, "removed": users.map(\.description)],
            "removed \(users.map(\.description).joined(separator: ", ")) from \(id.hex)", json: options.json)
    }
}
