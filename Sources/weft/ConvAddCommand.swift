import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ConvAddCommand: AsyncCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Add participants to a conversation.")

    @OptionGroup var options: NodeOptions
    @Argument(help: "The conversation (its identifier, as `weft conv ls` prints it).") var conversation: String
    @Argument(help: "User identifiers, or display names this node has met.") var participants: [String]

    func execute() async throws {
        let id = try parseConversation(conversation)
        let users = try await options.withNode { node in
            let users = try await resolveParticipants(participants) { try await node.users() }
            try await node.perform(.addParticipants(users, to: id))
            return users
        }
        try report(
            ["conversation": id.hex, "added": users.map(\.description)],
            "added \(users.map(\.description).joined(separator: ", ")) to \(id.hex)", json: options.json)
    }
}
