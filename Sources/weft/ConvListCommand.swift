import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ConvListCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List your conversations, oldest first: identifier, participants, messages, unread.")

    @OptionGroup var options: NodeOptions

    func execute() async throws {
        let (records, people) = try await options.withNode { node in
            (try await node.allConversations(), try await node.people(showIdentifiers: options.ids))
        }
        if options.json { return try printJSON(records.map { $0.json() }) }
        for record in records {
            let title = record.metadata["title"].map { "  \"\($0)\"" } ?? ""
            let others = record.participants.filter { $0 != people.localUser }.map(people.name).joined(separator: ", ")
            say("\(record.id.hex)  with \(others.isEmpty ? "nobody else" : others)  \(record.messageCount) messages  "
                + "\(record.unreadCount) unread\(record.isDistinct ? "  distinct" : "")\(title)")
        }
    }
}
