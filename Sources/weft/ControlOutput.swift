import Foundation
import WeftControl
import WeftCrypto
import WeftModel
import WeftNode

// How the control records print: JSON objects with the stable field names listed in the
// README, and the text forms. JSON: identifiers in hex, users as `weft1...`, times in
// milliseconds since 1970, null where the node does not know.

/// Prints one JSON value on one line, keys sorted.
func printJSON(_ value: Any) throws {
    let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
    say(String(decoding: data, as: UTF8.self))
}

/// What a command that changes something did: one line, or with `--json` one object.
func report(_ object: [String: Any], _ line: String, json: Bool) throws {
    if json { try printJSON(object) } else { say(line) }
}

/// An ISO 8601 time (UTC, milliseconds) for text output.
func timeText(milliseconds: UInt64) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
}

private func orNull(_ value: UInt64?) -> Any { value.map { $0 as Any } ?? NSNull() }

extension ConversationRecord {
    /// `requested`: the identifier the user asked for; if it was merged, `mergedInto` says where.
    func json(requested: ConversationID? = nil) -> [String: Any] {
        [
            "id": id.hex, "url": "weft:///conversations/\(id.hex)",
            "mergedInto": requested.flatMap { $0 == id ? nil : id.hex } ?? NSNull(),
            "merged": merged.map(\.hex), "creator": "\(creator)", "createdAt": createdAt.milliseconds,
            "distinct": isDistinct, "participants": participants.map { "\($0)" }, "metadata": metadata,
            "messageCount": messageCount, "unreadCount": unreadCount,
            "lastMessageAt": orNull(lastMessageAt?.milliseconds), "unsyncedOperations": orNull(unsyncedOperations),
        ]
    }
}

extension MessageRecord {
    var json: [String: Any] {
        [
            "id": id.hex, "url": "weft:///messages/\(id.hex)", "conversation": conversation.hex, "sender": "\(sender)",
            "sentAt": sentAt.milliseconds, "position": position, "isSent": isSent, "isUnread": isUnread,
            "parts": parts.map { part -> [String: Any] in
                var object: [String: Any] = ["mimeType": part.mimeType, "size": part.size, "text": part.text ?? NSNull()]
                object["data"] = part.inlineData.isEmpty && part.size > 0 ? NSNull() : Data(part.inlineData).base64EncodedString()
                object["content"] = part.content.map { content -> [String: Any] in
                    [
                        "root": content.root.map { String(format: "%02x", $0) }.joined(), "status": "\(content.status)",
                        "verifiedBytes": content.verifiedBytes, "reason": nonEmpty(content.reason),
                    ]
                } ?? NSNull()
                return object
            },
            "recipients": recipients.map { ["user": "\($0.user)", "status": "\($0.status)", "reason": nonEmpty($0.reason)] },
        ]
    }
}

extension MessageRecord {
    /// The message as a chat shows it: time, conversation, sender and its text; a part that
    /// is not inline text by its type and size.
    func line(_ people: People) -> String {
        let content = parts.map { part in part.text ?? "[\(part.mimeType), \(part.size) bytes\(part.content.map { ", \($0.status)" } ?? "")]" }
            .joined(separator: " ")
        return "\(timeText(milliseconds: sentAt.milliseconds))  \(conversation.hex)  \(people.name(sender)): \(content)"
    }
}

extension MessageRecord.Part {
    /// The data as text, for a `text/*` part carried inline in valid UTF-8.
    var text: String? {
        guard mimeType.lowercased().hasPrefix("text/"), inlineData.count == Int(size) else { return nil }
        return String(validating: inlineData, as: UTF8.self)
    }
}

extension PeerRecord {
    var json: [String: Any] {
        [
            "user": "\(user)", "displayName": nonEmpty(displayName), "address": nonEmpty(address), "origin": "\(origin)",
            "connectedAt": connectedAt,
            "holdings": holdings.map { ["conversations": $0.conversations, "operations": $0.operations] as [String: Any] } ?? NSNull(),
        ]
    }
}

extension NodeStatus {
    var json: [String: Any] {
        [
            "user": "\(user)", "displayName": nonEmpty(displayName), "listenAddress": nonEmpty(listenAddress), "startedAt": startedAt,
            "connectedPeers": connectedPeers, "conversations": conversations, "unsentMessages": unsentMessages,
            "timeToLiveSeconds": timeToLiveSeconds, "retentionDays": retentionDays, "replicating": isReplicating,
            "heldOperations": orNull(heldOperations), "unsyncedOperations": orNull(unsyncedOperations),
            "discovery": discovery, "discoveryInterfaces": discoveryInterfaces,
        ]
    }
}

extension ControlEvent {
    var json: [String: Any] {
        switch self {
        case .conversation(let kind, let id, let property):
            ["type": "conversation", "change": "\(kind)", "conversation": id.hex, "property": nonEmpty(Self.fieldName(property))]
        case .message(let kind, let id, let conversation, let property):
            [
                "type": "message", "change": "\(kind)", "message": id.hex, "conversation": conversation?.hex ?? NSNull(),
                "property": nonEmpty(Self.fieldName(property)),
            ]
        case .delivery(let message, let recipient, let status, let reason):
            ["type": "delivery", "message": message.hex, "recipient": "\(recipient)", "status": "\(status)", "reason": nonEmpty(reason)]
        case .missed(let count):
            ["type": "missed", "batches": count]
        case .newMessage(let record):
            ["type": "newMessage", "message": record.json]
        }
    }

    /// One line for a person, users named as `people` names them.
    func text(_ people: People) -> String {
        switch self {
        case .conversation(let kind, let id, let property):
            "conversation \(kind) \(id.hex)\(property.isEmpty ? "" : " \(Self.fieldName(property))")"
        case .message(let kind, let id, let conversation, let property):
            "message \(kind) \(id.hex)\(conversation.map { " in \($0.hex)" } ?? "")\(property.isEmpty ? "" : " \(Self.fieldName(property))")"
        case .delivery(let message, let recipient, let status, let reason):
            "delivery \(message.hex) to \(people.name(recipient)) \(status)\(reason.isEmpty ? "" : ": \(reason)")"
        case .missed(let count):
            "missed \(count) batches of changes; re-read the state"
        case .newMessage(let record):
            record.line(people)
        }
    }
}

extension ControlEvent {
    /// A changed property as the record's JSON field is named (README): the node names the
    /// API's properties (`totalMessageCount`), the records say `messageCount`.
    static func fieldName(_ property: String) -> String {
        switch property {
        case "totalMessageCount": "messageCount"
        case "unreadMessageCount": "unreadCount"
        case "mergedIdentifiers": "merged"
        case "isDistinct": "distinct"
        case "recipientStatus": "recipients"
        default: property
        }
    }
}

/// JSON null for an empty text: "no value" reads as null, never as "".
func nonEmpty(_ text: String) -> Any { text.isEmpty ? NSNull() : text }

/// "unknown" for what the node cannot tell (it does not replicate yet).
func countText(_ value: UInt64?) -> String { value.map { "\($0)" } ?? "unknown" }
