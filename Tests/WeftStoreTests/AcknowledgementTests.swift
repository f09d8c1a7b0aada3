import Foundation
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("Store: acknowledgements by slot (SPEC.md §14.7)")
struct AcknowledgementTests {
    static let now: UInt64 = 1_700_000_000_000

    /// A store whose user created a conversation with `friend` (sequence 1) and posted `count`
    /// messages in it (sequences 2...), each waiting in the outbox.
    static func posted(
        _ count: Int, by identity: NodeIdentity, friend: UserID = NodeIdentity.generate().publicKey
    ) async throws -> (Store, SignedOperation, [SignedOperation]) {
        var me = Author(identity: identity)
        let store = try Store(directory: nil, localUser: me.user)
        let create = me.createConversation(with: [friend], in: try store.replica, wallMilliseconds: now)
        _ = try await store.commitLocal([create])
        var posts: [SignedOperation] = []
        for index in 0..<count {
            let post = me.write(LocalWriteTests.text("m\(index)"), in: create.operation.conversation, replica: try store.replica,
                                wallMilliseconds: now + 1 + UInt64(index))
            _ = try await store.commitLocal([post], outbox: [OutboxEntry(posting: post, createdAt: now + UInt64(index))])
            posts.append(post)
        }
        return (store, create, posts)
    }

    @Test("the local user's waiting or failed messages in the acknowledged slots become sent; other slots change nothing")
    func marksTheSlotsMessages() async throws {
        let identity = NodeIdentity.generate()
        let (store, create, posts) = try await Self.posted(4, by: identity)
        let conversation = create.operation.conversation
        try await store.markFailed(posts[1].id, reason: "expired")
        // Another author's slots, another log's, and slots past the messages name none of them.
        let others = [
            SlotRange(conversation: conversation, author: NodeIdentity.generate().publicKey, sequences: 1...9),
            SlotRange(conversation: ConversationID.random(), author: identity.publicKey, sequences: 1...9),
            SlotRange(conversation: conversation, author: identity.publicKey, sequences: 6...9),
        ]
        #expect(try store.unsentMessages(acknowledgedIn: others).isEmpty)
        #expect(try await store.markSent(acknowledged: others).isEmpty)

        // Sequences 1 to 3: the creation (no outbox entry) and the first two messages, one failed.
        let sent = try await store.markSent(acknowledged: [SlotRange(conversation: conversation, author: identity.publicKey, sequences: 1...3)])
        #expect(Set(sent) == [posts[0].id, posts[1].id])
        #expect(try store.outbox().map(\.message) == [posts[2].id, posts[3].id])
        // Acknowledged again, and the last by a range of its own: only what was not sent yet.
        let again = try await store.markSent(acknowledged: SlotRange.covering(posts.map(\.operation)))
        #expect(Set(again) == [posts[2].id, posts[3].id])
        #expect(try store.outbox().isEmpty)
        #expect(try store.outboxEntries().map(\.state) == Array(repeating: .sent, count: 4))
    }

    @Test("a slot where the store holds another operation too (a fork) names neither")
    func forkedSlotNamesNothing() async throws {
        let identity = NodeIdentity.generate()
        let (store, create, posts) = try await Self.posted(2, by: identity)
        let conversation = create.operation.conversation
        // The same user on another device, which saw only the creation, writes sequence 2 too.
        var twin = Author(identity: identity)
        var replica = Replica(localUser: identity.publicKey)
        _ = replica.apply(verified: [create])
        let fork = twin.write(LocalWriteTests.text("other device"), in: conversation, replica: replica, wallMilliseconds: Self.now + 10)
        #expect(fork.operation.sequence == posts[0].operation.sequence)
        _ = try await store.apply(received: [fork], wallMilliseconds: Self.now + 20)

        // Both halves are refused (§13.1), and the message is not acknowledged by its slot.
        #expect(try store.unsentMessages(acknowledgedIn: [SlotRange(conversation: conversation, author: identity.publicKey, sequences: 2...2)]) == [])
        // Sequence 3 follows the forked slot, so it is refused as well, but it is alone in its slot.
        #expect(try store.unsentMessages(acknowledgedIn: [SlotRange(conversation: conversation, author: identity.publicKey, sequences: 2...3)])
            == [posts[1].id])
    }

    @Test("an accepted message whose slot also holds a pending operation is not named either")
    func pendingSiblingNamesNothing() async throws {
        let identity = NodeIdentity.generate()
        var friend = Author(identity: .generate())
        let (store, create, posts) = try await Self.posted(1, by: identity, friend: friend.user)
        let conversation = create.operation.conversation
        // The other device saw a message of the friend this store lacks: its sequence 2 waits
        // for that cause, pending, while the store's own sequence 2 stays accepted.
        var replica = Replica(localUser: identity.publicKey)
        _ = replica.apply(verified: [create])
        let unseen = friend.write(LocalWriteTests.text("unseen"), in: conversation, replica: replica, wallMilliseconds: Self.now + 5)
        _ = replica.apply(verified: [unseen])
        var twin = Author(identity: identity)
        let fork = twin.write(LocalWriteTests.text("other device"), in: conversation, replica: replica, wallMilliseconds: Self.now + 10)
        #expect(fork.operation.sequence == posts[0].operation.sequence)
        let applied = try await store.apply(received: [fork], wallMilliseconds: Self.now + 20)
        #expect(applied.report.pending == [fork.id])

        #expect(try store.unsentMessages(acknowledgedIn: [SlotRange(conversation: conversation, author: identity.publicKey, sequences: 2...2)]) == [])
        #expect(try store.outbox().map(\.message) == [posts[0].id])
    }

    @Test("the unsent messages are found by slot after the store reopens; what was sent before stays sent")
    func slotsSurviveAReopen() async throws {
        let identity = NodeIdentity.generate()
        var me = Author(identity: identity)
        let directory = LogSummaryTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var posts: [SignedOperation] = []
        let conversation: ConversationID
        do {
            let store = try Store(directory: directory, localUser: me.user)
            let create = me.createConversation(with: [NodeIdentity.generate().publicKey], in: try store.replica, wallMilliseconds: Self.now)
            _ = try await store.commitLocal([create])
            conversation = create.operation.conversation
            for index in 0..<3 {
                let post = me.write(LocalWriteTests.text("m\(index)"), in: conversation, replica: try store.replica, wallMilliseconds: Self.now + 1 + UInt64(index))
                _ = try await store.commitLocal([post], outbox: [OutboxEntry(posting: post, createdAt: Self.now)])
                posts.append(post)
            }
            #expect(try await store.markSent(acknowledged: [SlotRange(conversation: conversation, author: me.user, sequences: 2...2)]) == [posts[0].id])
        }
        let reopened = try Store(directory: directory, localUser: me.user)
        let everySlot = [SlotRange(conversation: conversation, author: me.user, sequences: 1...9)]
        #expect(try reopened.unsentMessages(acknowledgedIn: everySlot) == [posts[1].id, posts[2].id])
        #expect(Set(try await reopened.markSent(acknowledged: everySlot)) == [posts[1].id, posts[2].id])
        #expect(try reopened.outbox().isEmpty)
    }

    @Test("a range as long as a sequence goes (a peer's, unchecked) finds the messages in it without walking it")
    func longestRange() async throws {
        let identity = NodeIdentity.generate()
        let (store, create, posts) = try await Self.posted(2, by: identity)
        let range = SlotRange(conversation: create.operation.conversation, author: identity.publicKey, sequences: 0...UInt64.max)
        #expect(try store.unsentMessages(acknowledgedIn: [range]) == posts.map(\.id))
    }
}
