import Foundation
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

    @Option(help: "Only the last N messages (in conversation order).")
    var limit: Int?

    @Option(help: "Only messages sent at or after TIME: an ISO 8601 date or time (2026-11-26, 2026-11-26T17:00:00Z), or milliseconds since 1970.")
    var since: String?

    @Flag(help: "Only messages the local user has not read.")
    var unread = false

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be at least 1.") }
        if let since, Self.milliseconds(since) == nil {
            throw ValidationError("--since takes an ISO 8601 date or time (2026-11-26, 2026-11-26T17:00:00Z) or milliseconds since 1970, not \"\(since)\".")
        }
    }

    /// `TIME` as milliseconds since 1970: digits as they are, else an ISO 8601 time with a zone,
    /// else a date (its midnight, UTC).
    static func milliseconds(_ time: String) -> UInt64? {
        if let value = UInt64(time) { return value }
        let full = ISO8601DateFormatter()
        full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        guard let date = full.date(from: time) ?? plain.date(from: time) ?? day.date(from: time) else { return nil }
        return UInt64(max(0, date.timeIntervalSince1970 * 1000))
    }

    func execute() async throws {
        let id = try parseConversation(conversation)
        var (messages, people) = try await options.withNode { node in
            (try await node.allMessages(in: id), try await node.people(showIdentifiers: options.ids))
        }
        if let since, let start = Self.milliseconds(since) { messages.removeAll { $0.sentAt.milliseconds < start } }
        if unread { messages.removeAll { !$0.isUnread } }
        if let limit, messages.count > limit { messages.removeFirst(messages.count - limit) }
        if options.json { return try printJSON(messages.map(\.json)) }
        for message in messages {
            let sender = people.name(message.sender)
            say("\(message.id.hex)  \(timeText(milliseconds: message.sentAt.milliseconds))  from \(sender)  "
                + "\(message.isSent ? "sent" : "not sent yet")\(message.isUnread ? "  unread" : "")")
            for (index, part) in message.parts.enumerated() {
                let content = part.text.map { ": \"\($0)\"" } ?? ""
                let transfer = part.content.map { state in
                    ", \(state.status)" + (state.status == .downloading ? " \(state.verifiedBytes * 100 / max(part.size, 1)) %" : "")
                        + (state.reason.isEmpty ? "" : " (\(state.reason))")
                } ?? ""
                say("  part \(index + 1): \(part.mimeType), \(part.size) bytes\(transfer)\(content)")
            }
            for recipient in message.recipients {
                say("  \(people.name(recipient.user)): \(recipient.status)"
                    + (recipient.reason.isEmpty ? "" : " (\(recipient.reason))"))
            }
        }
    }
}
