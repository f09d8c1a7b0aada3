import Foundation
import Testing
import Weft
import WeftCrypto
import WeftModel
import WeftStore

@Suite("the client API")
struct ClientTests {
    @Test("a MIME type not of the form type/subtype is refused with a clear error", arguments: ["text", "", "/plain", "text/", "te xt/plain", "a/b/c"])
    func badMIMEType(type: String) async throws {
        let alice = try makeClient()
        let bob = NodeIdentity.generate().publicKey
        let conversation = try await alice.createConversation(with: [bob])
        await #expect(throws: WeftError.invalidMIMEType(type)) {
            try await alice.send([MessagePart(mimeType: type, data: [1])], in: conversation.id)
        }
        #expect(throws: WeftError.invalidMIMEType(type)) { try MessagePart.validated(mimeType: type, data: []) }
        #expect(WeftError.invalidMIMEType(type).description.contains("type/subtype"))
        #expect(try await alice.count(MessageQuery()) == 0)
    }

    @Test("sending stores the message and its outbox entry and returns at once; recipients are pending until sent")
    func sendAndOutbox() async throws {
        let alice = try makeClient()
        let bob = NodeIdentity.generate().publicKey
        let conversation = try await alice.createConversation(with: [bob])
        let message = try await alice.send([.text("hello"), try .validated(mimeType: "image/png", data: [0x89])], in: conversation.id)
        #expect(!message.isSent)
        #expect(message.recipientStatus == [bob: .pending])
        #expect(message.parts.first?.text == "hello")
        let outbox = try alice.store.outbox()
        #expect(outbox.map(\.message) == [message.id])
        #expect(outbox.first.map { $0.expiresAt - $0.createdAt } == 12 * 3600 * 1000)
        try await alice.markSent(message.id)
        let sent = try #require(try await alice.message(message.id))
        #expect(sent.isSent)
        #expect(sent.recipientStatus == [bob: .sent])
        #expect(try alice.store.outbox().isEmpty)
    }

    @Test("per-recipient status climbs sent < delivered < read across two clients")
    func recipientStatus() async throws {
        let clock = TestClock()
        let alice = try makeClient(clock: clock)
        let bob = try makeClient(clock: clock)
        let conversation = try await alice.createConversation(with: [bob.localUser])
        let first = try await alice.send([.text("one")], in: conversation.id)
        let second = try await alice.send([.text("two")], in: conversation.id)
        try await alice.markSent(first.id)
        try await alice.markSent(second.id)
        clock.advance(10)

        try await sync(alice, to: bob)  // bob's node records delivery
        let atBob = try #require(try await bob.message(first.id))
        #expect(atBob.isUnread)
        #expect(try await bob.conversation(conversation.id)?.unreadMessageCount == 2)
        try await sync(bob, to: alice)
        #expect(try await alice.message(first.id)?.recipientStatus == [bob.localUser: .delivered])

        try await bob.markAsRead(first.id)
        #expect(try await bob.conversation(conversation.id)?.unreadMessageCount == 1)
        try await sync(bob, to: alice)
        #expect(try await alice.message(first.id)?.recipientStatus == [bob.localUser: .read])
        #expect(try await alice.message(second.id)?.recipientStatus == [bob.localUser: .delivered])

        try await bob.markAllMessagesAsRead(in: conversation.id)
        #expect(try await bob.conversation(conversation.id)?.unreadMessageCount == 0)
        try await sync(bob, to: alice)
        #expect(try await alice.message(second.id)?.recipientStatus == [bob.localUser: .read])
    }

    @Test("a user removed from a group has nothing unread there: the count and the messages agree, and a read is refused")
    func unreadAfterRemoval() async throws {
        let clock = TestClock()
        let alice = try makeClient(clock: clock)
        let bob = try makeClient(clock: clock)
        let carol = try makeClient(clock: clock)
        let group = try await alice.createConversation(with: [bob.localUser, carol.localUser], options: ConversationOptions(distinct: false))
        let hello = try await alice.send([.text("hello")], in: group.id)
        clock.advance(10)
        try await sync(alice, to: carol)
        #expect(try await carol.conversation(group.id)?.unreadMessageCount == 1)
        #expect(try await carol.message(hello.id)?.isUnread == true)

        try await alice.removeParticipants([carol.localUser], from: group.id)
        clock.advance(10)
        try await sync(alice, to: carol)
        // Carol can no longer mark anything read there, so nothing stays unread for her; the
        // conversation's count and each message say the same.
        #expect(try await carol.conversation(group.id)?.unreadMessageCount == 0)
        #expect(try await carol.message(hello.id)?.isUnread == false)
        await #expect(throws: WeftError.notAParticipant) { try await carol.markAsRead(hello.id) }
        await #expect(throws: WeftError.notAParticipant) { try await carol.markAllMessagesAsRead(in: group.id) }

        // Added back, what she had not read is unread again, and she can read it.
        try await alice.addParticipants([carol.localUser], to: group.id)
        clock.advance(10)
        try await sync(alice, to: carol)
        #expect(try await carol.conversation(group.id)?.unreadMessageCount == 1)
        try await carol.markAsRead(hello.id)
        #expect(try await carol.conversation(group.id)?.unreadMessageCount == 0)
    }

    @Test("identifiers are weft:/// URLs that round-trip; others are refused")
    func identifiers() async throws {
        let alice = try makeClient()
        let conversation = try await alice.createConversation(with: [NodeIdentity.generate().publicKey])
        let message = try await alice.send([.text("x")], in: conversation.id)
        #expect(conversation.identifier.absoluteString.hasPrefix("weft:///conversations/"))
        #expect(message.identifier.absoluteString.hasPrefix("weft:///messages/"))
        #expect(try WeftIdentifier(url: conversation.identifier) == .conversation(conversation.id))
        #expect(try WeftIdentifier(url: message.identifier) == .message(message.id))
        for bad in ["layer:///messages/00", "weft:///messages/zz", "weft:///people/00", "weft://host/messages/00"] {
            #expect(throws: WeftError.invalidIdentifier(bad)) { try WeftIdentifier(url: URL(string: bad)!) }
        }
    }

    @Test("waiting for an object returns it as soon as it exists, or times out")
    func waitForObject() async throws {
        let alice = try makeClient()
        let bob = try makeClient()
        let conversation = try await alice.createConversation(with: [bob.localUser])
        let message = try await alice.send([.text("soon")], in: conversation.id)

        await #expect(throws: WeftError.timedOut(WeftIdentifier.message(message.id).description)) {
            _ = try await bob.waitForObject(message.identifier, timeout: .milliseconds(100))
        }
        // A deadline against hangs, not a speed goal: the CPU-bound suites beside this one can
        // hold both cooperative threads for tens of seconds (as `eventually` allows 60 s).
        async let waited = bob.waitForObject(message.identifier, timeout: .seconds(60))
        try await Task.sleep(for: .milliseconds(50))
        try await sync(alice, to: bob)
        guard case .message(let found) = try await waited else {
            Issue.record("expected a message")
            return
        }
        #expect(found.id == message.id)
        // Already there: returns at once.
        guard case .conversation = try await bob.waitForObject(conversation.identifier, timeout: .milliseconds(1)) else {
            Issue.record("expected a conversation")
            return
        }
    }

    @Test("creating a distinct conversation again returns the existing one; non-distinct ones repeat")
    func distinctReturnsExisting() async throws {
        let alice = try makeClient()
        let bob = NodeIdentity.generate().publicKey
        let first = try await alice.createConversation(with: [bob])
        let again = try await alice.createConversation(with: [bob])
        #expect(first.id == again.id)
        let topicA = try await alice.createConversation(with: [bob], options: .init(distinct: false))
        let topicB = try await alice.createConversation(with: [bob], options: .init(distinct: false, metadata: ["title": "B"]))
        #expect(Set([first.id, topicA.id, topicB.id]).count == 3)
        #expect(topicB.metadata == ["title": "B"])
        await #expect(throws: WeftError.noParticipants) { try await alice.createConversation(with: []) }
    }

    @Test("only the sender may delete a message; deletion removes it for everyone")
    func deletion() async throws {
        let alice = try makeClient()
        let bob = try makeClient()
        let conversation = try await alice.createConversation(with: [bob.localUser])
        let message = try await alice.send([.text("oops")], in: conversation.id)
        try await sync(alice, to: bob)
        await #expect(throws: WeftError.notPermitted("only the sender may delete a message")) { try await bob.delete(message.id) }
        try await alice.delete(message.id)
        #expect(try await alice.message(message.id) == nil)
        try await sync(alice, to: bob)
        #expect(try await bob.message(message.id) == nil)
        #expect(try await bob.conversation(conversation.id)?.totalMessageCount == 0)
    }

    @Test("participants are added and removed; removed users stop being recipients; options travel with the message")
    func membershipAndOptions() async throws {
        let clock = TestClock()
        let alice = try makeClient(clock: clock)
        let bob = try makeClient(clock: clock)
        let carol = NodeIdentity.generate().publicKey
        let conversation = try await alice.createConversation(with: [bob.localUser], options: .init(metadata: ["title": "plans"]))
        try await alice.addParticipants([carol], to: conversation.id)
        let withCarol = try #require(try await alice.conversation(conversation.id))
        #expect(withCarol.participants == [alice.localUser, bob.localUser, carol])
        #expect(!withCarol.isDistinct)
        #expect(withCarol.metadata == ["title": "plans"])

        try await alice.removeParticipants([carol], from: conversation.id)
        #expect(try await alice.conversation(conversation.id)?.participants == [alice.localUser, bob.localUser])
        let message = try await alice.send(
            [.text("meet at 6")], options: MessageOptions(notificationText: "Alice: meet at 6", notificationSound: "chime"),
            in: conversation.id)
        #expect(message.status(for: carol) == .invalid)
        #expect(message.status(for: alice.localUser) == .invalid)
        #expect(message.status(for: bob.localUser) == .pending)

        try await sync(alice, to: bob)
        let received = try #require(try await bob.message(message.id))
        #expect(received.options.notificationText == "Alice: meet at 6")
        #expect(received.options.notificationSound == "chime")
        try await bob.setMetadata(["title": "dinner", "place": "home"], in: conversation.id)
        try await sync(bob, to: alice)
        #expect(try await alice.conversation(conversation.id)?.metadata == ["title": "dinner", "place": "home"])

        // Bob leaves; he can no longer write to it (what his last send found out about his
        // membership is forgotten when he leaves).
        try await bob.send([.text("bye")], in: conversation.id)
        try await bob.removeParticipants([bob.localUser], from: conversation.id)
        await #expect(throws: WeftError.notAParticipant) { try await bob.send([.text("still here?")], in: conversation.id) }
    }

    @Test("fields and messages beyond the protocol's limits are refused before anything is signed")
    func limits() async throws {
        let alice = try makeClient()
        let conversation = try await alice.createConversation(with: [NodeIdentity.generate().publicKey])
        let longText = String(repeating: "x", count: 70_000)
        await #expect(throws: WeftError.tooLarge("a text field of 70000 bytes (the limit is 65,535)")) {
            try await alice.setMetadata(["title": longText], in: conversation.id)
        }
        await #expect(throws: WeftError.self) {
            try await alice.send([MessagePart(mimeType: "application/octet-stream", data: [UInt8](repeating: 7, count: 600_000))], in: conversation.id)
        }
        // Just under the limit goes through.
        try await alice.send([MessagePart(mimeType: "application/octet-stream", data: [UInt8](repeating: 7, count: 400_000))], in: conversation.id)
        #expect(try await alice.count(MessageQuery()) == 1)
    }
}
