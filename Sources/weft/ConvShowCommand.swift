import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct ConvShowCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show a conversation: participants, distinct, metadata, merges, message and unread counts, your messages not sent yet and why, operations not yet synced.")

    @OptionGroup var options: NodeOptions
    @Argument(help: "The conversation.") var conversation: String

    func execute() async throws {
        let id = try parseConversation(conversation)
        let (record, people, messages) = try await options.withNode { node in
            (try await node.conversation(id), try await node.people(showIdentifiers: options.ids), try await node.allMessages(in: id))
        }
        // The local user's messages no peer has taken yet, and why they wait, where known.
        let waiting = messages.filter { $0.sender == people.localUser && !$0.isSent }
        let reasons = Set(waiting.flatMap { $0.recipients.filter { $0.status == .pending && !$0.reason.isEmpty }.map(\.reason) }).sorted()
        if options.json {
            var object = record.json(requested: id)
            object["waitingMessages"] = waiting.count
            object["waitingReasons"] = reasons
            return try printJSON(object)
        }
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
        say("your messages not sent yet: \(waiting.count)")
        for reason in reasons { say("  \(reason)") }
        say("operations not yet synced: \(countText(record.unsyncedOperations))")
    }
}
