import Foundation
import Testing
import Weft
import WeftCrypto
import WeftModel
import WeftStore

@Suite("change notifications and live queries")
struct ChangeTests {
    @Test("a new message, a participant change, a receipt and a merge each produce the changes a UI needs")
    func changes() async throws {
        let clock = TestClock()
        let alice = try makeClient(clock: clock)
        let bob = try makeClient(clock: clock)
        let changes = ChangeLog(alice)

        // Created apart: both make the distinct conversation.
        let mine = try await alice.createConversation(with: [bob.localUser])
        clock.advance(5)
        let theirs = try await bob.createConversation(with: [alice.localUser])
        try await bob.send([.text("from bob")], in: theirs.id)
        try await changes.settle()
        #expect(changes.all.contains { $0.kind == .create && $0.object == .conversation(mine) })
        changes.clear()

        // They meet: alice's conversation (created first) is canonical; bob's merges into it.
        try await sync(bob, to: alice)
        try await changes.settle()
        let merged = changes.all
        #expect(merged.contains { $0.kind == .update && $0.property == .mergedIdentifiers && $0.newValue == .conversations([theirs.id]) })
        #expect(merged.contains { change in
            if case .message(let message) = change.object { change.kind == .create && message.conversation == mine.id } else { false }
        })
        #expect(try await alice.conversation(theirs.id)?.id == mine.id)
        changes.clear()

        // A new message.
        let sent = try await alice.send([.text("hi")], in: mine.id)
        try await changes.settle()
        #expect(changes.all.contains { $0.kind == .create && $0.object == .message(sent) })
        #expect(changes.all.contains { $0.property == .totalMessageCount && $0.oldValue == .int(1) && $0.newValue == .int(2) })
        changes.clear()

        // A participant change ends distinctness.
        let carol = NodeIdentity.generate().publicKey
        try await alice.addParticipants([carol], to: mine.id)
        try await changes.settle()
        #expect(changes.all.contains { $0.property == .isDistinct && $0.oldValue == .bool(true) && $0.newValue == .bool(false) })
        #expect(changes.all.contains { change in
            if case .users(let users) = change.newValue { change.property == .participants && users.contains(carol) } else { false }
        })
        changes.clear()

        // A receipt from bob.
        let bobUser = bob.localUser
        try await sync(alice, to: bob)
        try await bob.markAllMessagesAsRead(in: mine.id)
        try await sync(bob, to: alice)
        try await changes.settle()
        #expect(changes.all.contains { change in
            if case .statuses(let statuses) = change.newValue {
                change.property == .recipientStatus && statuses[bobUser] == .read
            } else { false }
        })
    }

    @Test("a live query reports inserts, moves and deletes as the data changes")
    func liveQuery() async throws {
        let clock = TestClock()
        let alice = try makeClient(clock: clock)
        let bob = try makeClient(clock: TestClock())  // bob's clock stays behind alice's
        let conversation = try await alice.createConversation(with: [bob.localUser])
        try await sync(alice, to: bob)
        let query = MessageQuery([Predicate(.conversation, .equal, .conversation(conversation.id))], sort: [SortDescriptor(.position)])
        var updates = alice.liveQuery(query).makeAsyncIterator()
        #expect(try await updates.next()?.results.isEmpty == true)

        clock.advance(100)
        let late = try await alice.send([.text("second by time")], in: conversation.id)
        let first = try #require(try await updates.next())
        #expect(first.inserts == [0])
        #expect(first.results.map(\.id) == [late.id])

        // Bob wrote earlier (by clock) while apart: his message sorts before alice's, so hers moves.
        let early = try await bob.send([.text("first by time")], in: conversation.id)
        try await sync(bob, to: alice)
        var step = try #require(try await updates.next())
        while !step.inserts.contains(0) { step = try #require(try await updates.next()) }
        #expect(step.results.map(\.id) == [early.id, late.id])
        #expect(step.moves == [.init(from: 0, to: 1)])

        try await alice.delete(late.id)
        var gone = try #require(try await updates.next())
        while gone.deletes.isEmpty { gone = try #require(try await updates.next()) }
        #expect(gone.deletes == [1])
        #expect(gone.results.map(\.id) == [early.id])
    }

    @Test("queries filter, sort, limit and count")
    func queries() async throws {
        let clock = TestClock()
        let alice = try makeClient(clock: clock)
        let bob = NodeIdentity.generate().publicKey
        let carol = NodeIdentity.generate().publicKey
        let withBob = try await alice.createConversation(with: [bob])
        let withCarol = try await alice.createConversation(with: [carol])
        var sent: [Message] = []
        for i in 0..<5 {
            clock.advance(1)
            sent.append(try await alice.send([.text("m\(i)")], in: i.isMultiple(of: 2) ? withBob.id : withCarol.id))
        }
        clock.advance(1)
        let image = try await alice.send([try .validated(mimeType: "image/png", data: [1, 2])], in: withBob.id)

        #expect(try await alice.count(ConversationQuery([Predicate(.participants, .contains, .user(carol))])) == 1)
        #expect(try await alice.conversations(ConversationQuery([Predicate(.participants, .contains, .user(bob))])).map(\.id) == [withBob.id])
        let latestTwo = try await alice.messages(MessageQuery(
            [Predicate(.conversation, .equal, .conversation(withBob.id))], sort: [SortDescriptor(.sentAt, ascending: false)], limit: 2))
        #expect(latestTwo.map(\.id) == [image.id, sent[4].id])
        #expect(try await alice.count(MessageQuery([Predicate(.mimeType, .contains, .string("image/png"))])) == 1)
        let middle = try await alice.messages(MessageQuery([Predicate(.sentAt, .greater, .timestamp(sent[1].sentAt)), Predicate(.sentAt, .less, .timestamp(image.sentAt))], sort: [SortDescriptor(.sentAt)]))
        #expect(middle.map(\.id) == [sent[2].id, sent[3].id, sent[4].id])
        let some = try await alice.messages(MessageQuery([Predicate(.identifier, .in, .list([.message(sent[0].id), .message(image.id)]))], sort: [SortDescriptor(.sentAt)], offset: 1))
        #expect(some.map(\.id) == [image.id])
    }
}
