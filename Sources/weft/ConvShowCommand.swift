import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ConvShowCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show a conversation: participants, distinct, metadata, merges, message and unread counts, operations not yet synced.")

    @OptionGroup var options: NodeOptions
    @Argument(help: "The conversation.") var conversation: String

    func execute() async throws {
        let id = try parseConversation(conversation)
        let (record, people) = try await options.withNode { node in
            (try await node.conversation(id), try await node.people(showIdentifiers: options.ids))
        }
        if options.json { return try printJSON(record.json(requested: id)) }
        say("conversation: \(record.id.hex)")
        if record.id != id { say("merged into: \(record.id.hex) (you asked for \(id.hex))") }
        for merged in record.merged { say("merged: \(merged.hex)") }
        say("creator: \(people.name(record.creator))")
        say("created: \(timeText(milliseconds: record.createdAt.milliseconds))")
        say("distinct: \(record.isDistinct ? "yes" : "no")")
        say("participants:")
        for user in record.participants { say("  \(people.name(user))") }
        if !record.metadata.isEmpty {
            say("metadata:")
            for (key, value) in record.metadata.sorted(by: { $0.key < $1.key }) { say("  \(key) = \(value)") }
        }
        say("messages: \(record.messageCount)")
        say("unread: \(record.unreadCount)")
        say("operations not yet synced: \(countText(record.unsyncedOperations))")
    }
}
