import Foundation
import WeftControl
import WeftCrypto
import WeftModel

// Identifiers as the CLI takes them: the hex it prints, or the weft:/// URL (SPEC.md §15.7).

/// A conversation: 32 hex digits or `weft:///conversations/<hex>`.
func parseConversation(_ text: String) throws -> ConversationID {
    guard case .conversation(let id)? = parseObject(text) else {
        throw CLIError("\"\(text)\" is not a conversation identifier (32 hex digits, or weft:///conversations/...).")
    }
    return id
}

/// A message: 64 hex digits or `weft:///messages/<hex>`.
func parseMessage(_ text: String) throws -> OperationID {
    guard case .message(let id)? = parseObject(text) else {
        throw CLIError("\"\(text)\" is not a message identifier (64 hex digits, or weft:///messages/...).")
    }
    return id
}

/// A conversation or a message, told apart by length or by the URL's path.
func parseObject(_ text: String) -> ControlObjectID? {
    var digits = Array(text.utf8)
    var expected: Int?
    for (prefix, length) in [("weft:///conversations/", 32), ("weft:///messages/", 64)] where text.hasPrefix(prefix) {
        digits.removeFirst(prefix.utf8.count)
        expected = length
    }
    guard expected == nil || digits.count == expected, digits.count % 2 == 0 else { return nil }
    var bytes: [UInt8] = []
    for index in stride(from: 0, to: digits.count, by: 2) {
        guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
        bytes.append(high << 4 | low)
    }
    if let id = ConversationID(bytes: bytes) { return .conversation(id) }
    if let id = OperationID(bytes: bytes) { return .message(id) }
    return nil
}

private func hexValue(_ digit: UInt8) -> UInt8? {
    switch digit {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// Participants as user identifiers (`weft1...`, as `weft id` prints them) or display names the
/// node has met, when exactly one user has that name.
///
/// A text is an identifier when, without the blanks around it, it starts with `weft1` in any
/// case, as SPEC.md §9 tells a reader to accept; everything else is a display name (§15.7).
func resolveParticipants(_ texts: [String], known: () async throws -> [KnownUser]) async throws -> [UserID] {
    var users: [KnownUser]?
    var resolved: [UserID] = []
    for text in texts {
        if looksLikeUserIdentifier(text) {
            do {
                resolved.append(try UserIdentifier.decode(text))
            } catch {
                throw CLIError("\"\(text)\" is not a valid user identifier: \(error).")
            }
            continue
        }
        let everyone: [KnownUser]
        if let users { everyone = users } else { everyone = try await known() }
        users = everyone
        let matches = everyone.filter { $0.displayName == text }
        switch matches.count {
        case 1: resolved.append(matches[0].user)
        case 0:
            throw CLIError("No user named \"\(text)\" is known to this node; give their user identifier (`weft id` on their node).")
        default:
            throw CLIError("\"\(text)\" is the name of \(matches.count) users; give one's user identifier instead: \(matches.map { "\($0.user)" }.joined(separator: ", ")).")
        }
    }
    return resolved
}

/// Whether `text` is meant as a user identifier rather than a display name (SPEC.md §15.7).
func looksLikeUserIdentifier(_ text: String) -> Bool {
    text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased().hasPrefix("weft1")
}
