import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ConvNewCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Create a conversation (distinct by default: one per participant set) and print its identifier."
    )

    @OptionGroup var options: NodeOptions

    @Flag(help: "Allow several conversations with the same participants.")
    var nonDistinct = false

    @Flag(help: "Replicate the conversation at once instead of with its first message.")
    var announce = false

    @Option(name: .customLong("meta"), help: "A metadata entry, KEY=VALUE (repeatable).")
    var metadata: [String] = []

    @Argument(help: "Participants besides you: user identifiers, or display names this node has met.")
    var participants: [String]

    func execute() async throws {
        var entries: [String: String] = [:]
        for entry in metadata {
            guard let equals = entry.firstIndex(of: "="), equals != entry.startIndex else {
                throw CLIError("--meta \"\(entry)\" is not KEY=VALUE.")
            }
            let key = String(entry[..<equals])
            guard entries.updateValue(String(entry[entry.index(after: equals)...]), forKey: key) == nil else {
                throw CLIError("--meta gives the key \"\(key)\" twice.")
            }
        }
        let record = try await options.withNode { node in
            let users = try await resolveParticipants(participants) { try await node.users() }
            let request = ControlRequest.CreateConversation(
                participants: users, distinct: !nonDistinct, announce: announce, metadata: entries)
            guard case .conversation(let record) = try await node.request(.createConversation(request)) else {
                throw ControlClientError.unexpectedResponse("CREATE CONVERSATION")
            }
            return record
        }
        if options.json { try printJSON(record.json()) } else { say(record.id.hex) }
    }
}
