import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ConvListCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List your conversations, oldest first: identifier, participants, messages, unread.")

    @OptionGroup var options: NodeOptions

    func execute() async throws {
        let records = try await options.withNode { try await $0.allConversations() }
        if options.json { return try printJSON(records.map { $0.json() }) }
        for record in records {
            let title = record.metadata["title"].map { "  \"\($0)\"" } ?? ""
            say("\(record.id.hex)  \(record.participants.count) participants  \(record.messageCount) messages  "
                + "\(record.unreadCount) unread\(record.isDistinct ? "  distinct" : "")\(title)")
        }
    }
}
