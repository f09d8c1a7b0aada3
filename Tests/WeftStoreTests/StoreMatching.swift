import Foundation
import Testing
import WeftModel
@testable import WeftStore

/// Checks, field by field, that what the store's tables say equals what `reference` says of
/// the conversations the local user sees (SPEC.md §14.9): each of them (looked up by its own
/// and by every merged identifier), every message of each in order with its position, and
/// nothing more: the conversations the store only relays have no rows.
func expectStore(_ store: Store, matches reference: Replica, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let expected = reference.conversations.filter { reference.shows($0.id) }
    for relayed in reference.conversations where !reference.shows(relayed.id) {
        #expect(try store.conversation(relayed.id) == nil, "relayed conversation \(relayed.id) has a row", sourceLocation: sourceLocation)
    }
    let stored = try store.conversations(ConversationQuery())
    #expect(stored.map(\.id) == expected.map(\.id), "canonical conversations", sourceLocation: sourceLocation)
    var messageTotal = 0
    for conversation in expected {
        for id in [conversation.id] + conversation.mergedIDs {
            let row = try store.conversation(id)
            expectFields(row, conversation, sourceLocation: sourceLocation)
        }
        let messages = reference.messages(in: conversation.id)
        messageTotal += messages.count
        let rows = try store.messages(MessageQuery([.init(.conversation, .equal, .conversation(conversation.id))], sort: [.init(.position)]))
        #expect(rows.map(\.id) == messages.map(\.id), "messages of \(conversation.id)", sourceLocation: sourceLocation)
        for (row, message) in zip(rows, messages) { expectFields(row, message, sourceLocation: sourceLocation) }
        for (row, message) in zip(rows, messages) {
            #expect(
                try store.count(MessageQuery([.init(.identifier, .equal, .message(row.id)), .init(.isUnread, .equal, .bool(true))])) == (reference.isUnread(message.id, postedTo: message.postedTo) ? 1 : 0),
                "isUnread of \(message.id)", sourceLocation: sourceLocation)
        }
    }
    #expect(try store.count(MessageQuery()) == messageTotal, "no messages beyond the conversations'", sourceLocation: sourceLocation)
}

func expectFields(_ row: ConversationSnapshot?, _ expected: ConversationSnapshot, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let row else {
        Issue.record("conversation \(expected.id) is missing from the store", sourceLocation: sourceLocation)
        return
    }
    let id = expected.id
    #expect(row.id == expected.id, "id of \(id)", sourceLocation: sourceLocation)
    #expect(row.mergedIDs == expected.mergedIDs, "mergedIDs of \(id)", sourceLocation: sourceLocation)
    #expect(row.creator == expected.creator, "creator of \(id)", sourceLocation: sourceLocation)
    #expect(row.createdAt == expected.createdAt, "createdAt of \(id)", sourceLocation: sourceLocation)
    #expect(row.participants == expected.participants, "participants of \(id)", sourceLocation: sourceLocation)
    #expect(row.isDistinct == expected.isDistinct, "isDistinct of \(id)", sourceLocation: sourceLocation)
    #expect(row.metadata == expected.metadata, "metadata of \(id)", sourceLocation: sourceLocation)
    #expect(row.messageCount == expected.messageCount, "messageCount of \(id)", sourceLocation: sourceLocation)
    #expect(row.unreadCount == expected.unreadCount, "unreadCount of \(id)", sourceLocation: sourceLocation)
    #expect(row.lastMessageAt == expected.lastMessageAt, "lastMessageAt of \(id)", sourceLocation: sourceLocation)
    #expect(row == expected, "conversation \(id)", sourceLocation: sourceLocation)
}

func expectFields(_ row: MessageSnapshot?, _ expected: MessageSnapshot, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let row else {
        Issue.record("message \(expected.id) is missing from the store", sourceLocation: sourceLocation)
        return
    }
    let id = expected.id
    #expect(row.id == expected.id, "id of \(id)", sourceLocation: sourceLocation)
    #expect(row.conversation == expected.conversation, "conversation of \(id)", sourceLocation: sourceLocation)
    #expect(row.postedTo == expected.postedTo, "postedTo of \(id)", sourceLocation: sourceLocation)
    #expect(row.sender == expected.sender, "sender of \(id)", sourceLocation: sourceLocation)
    #expect(row.sentAt == expected.sentAt, "sentAt of \(id)", sourceLocation: sourceLocation)
    // The store's rows carry bodies of up to 2048 bytes; larger ones stay in the log (v7).
    #expect(row.parts == expected.parts.map { $0.loaded(upTo: 2048) }, "parts of \(id)", sourceLocation: sourceLocation)
    #expect(row.options == expected.options, "options of \(id)", sourceLocation: sourceLocation)
    #expect(row.position == expected.position, "position of \(id)", sourceLocation: sourceLocation)
    #expect(row.recipientStatus == expected.recipientStatus, "recipientStatus of \(id)", sourceLocation: sourceLocation)
    var asStored = expected
    asStored.parts = expected.parts.map { $0.loaded(upTo: 2048) }
    #expect(row == asStored, "message \(id)", sourceLocation: sourceLocation)
}

/// A fresh directory removed at the end of the test.
final class TemporaryDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("weft-store-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}
