import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct MessagesCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "msgs",
        abstract: "List a conversation's messages: identifier, sender, time, parts, sent, status per recipient."
    )

    @OptionGroup var options: NodeOptions
    @Argument(help: "The conversation.") var conversation: String

    func execute() async throws {
        let id = try parseConversation(conversation)
        let (messages, users) = try await options.withNode { node in (try await node.allMessages(in: id), try await node.users()) }
        if options.json { return try printJSON(messages.map(\.json)) }
        let names = Dictionary(users.map { ($0.user, $0.displayName) }, uniquingKeysWith: { _, last in last })
        for message in messages {
            let sender = "\(message.sender)\(names[message.sender].map { " (\($0))" } ?? "")"
            say("\(message.id.hex)  \(timeText(milliseconds: message.sentAt.milliseconds))  from \(sender)  "
                + "\(message.isSent ? "sent" : "not sent yet")\(message.isUnread ? "  unread" : "")")
            for (index, part) in message.parts.enumerated() {
                let content = part.text.map { ": \"\($0)\"" } ?? ""
                say("  part \(index + 1): \(part.mimeType), \(part.size) bytes\(content)")
            }
            for recipient in message.recipients {
                say("  \(recipient.user)\(names[recipient.user].map { " (\($0))" } ?? ""): \(recipient.status)"
                    + (recipient.reason.isEmpty ? "" : " (\(recipient.reason))"))
            }
        }
    }
}
