import Foundation
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("Store: the change stream")
struct ChangeStreamTests {
    static let now: UInt64 = 1_700_000_000_000

    @Test("every writer's commit is published in order: local writes, received operations, the outbox")
    func everyWriter() async throws {
        let identity = NodeIdentity.generate()
        var peer = Author(identity: .generate())
        let store = try Store(directory: nil, localUser: identity.publicKey)
        let author = try LocalAuthor(store: store, identity: identity, wallClock: { Self.now })
        var changes = store.changes().makeAsyncIterator()

        let (conversation, _) = try await author.createConversation(with: [peer.user])
        let created = try #require(await changes.next())
        #expect(created.number == 1)
        #expect(created.changes.conversations.map(\.kind) == [.create])

        let post = try await author.post([MessagePart(mimeType: "text/plain", data: [1])], in: conversation)
        let posted = try #require(await changes.next())
        #expect(posted.changes.messages.map(\.id) == [post.id])
        #expect(posted.outbox.map(\.entry.message) == [post.id])
        #expect(posted.outbox.first?.previousState == nil)
        #expect(posted.waitingMessages == [post.id])

        try await store.recordAttempt(post.id)
        let attempted = try #require(await changes.next())
        #expect(attempted.outbox.first?.entry.attempts == 1)
        #expect(attempted.changes.isEmpty)

        try await store.markSent(post.id)
        let sent = try #require(await changes.next())
        #expect(sent.outbox.first?.previousState == .waiting)
        #expect(sent.outbox.first?.entry.state == .sent)
        #expect(sent.outbox.first?.message?.id == post.id)

        // A peer's reply applied by the raw store path (as a replication engine might).
        let reply = peer.write(
            .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [2])], options: .init()), in: conversation,
            replica: try store.replica, wallMilliseconds: Self.now + 1)
        _ = try await store.apply(received: [reply], wallMilliseconds: Self.now + 1)
        let received = try #require(await changes.next())
        #expect(received.changes.messages.contains { $0.id == reply.id && $0.kind == .create })
        #expect(received.waitingMessages.isEmpty)
        #expect([created, posted, attempted, sent, received].map(\.number) == [1, 2, 3, 4, 5])
        #expect(store.latestChangeNumber == 5)

        // A write that changes nothing publishes nothing.
        _ = try await store.apply(received: [reply], wallMilliseconds: Self.now + 1)
        #expect(store.latestChangeNumber == 5)
    }

    @Test("while no subscriber reads messages, commits leave out the messages they only update; the rows stay whole, and a subscriber that reads messages gets them")
    func withoutMessages() async throws {
        let identity = NodeIdentity.generate()
        var peer = Author(identity: .generate())
        let store = try Store(directory: nil, localUser: identity.publicKey)
        let author = try LocalAuthor(store: store, identity: identity, wallClock: { Self.now })
        var replication = store.changes(includingMessages: false).makeAsyncIterator()
        #expect(!store.changeBus.wantMessages)

        let (conversation, _) = try await author.createConversation(with: [peer.user])
        _ = await replication.next()
        let parts = [MessagePart(mimeType: "text/plain", data: [1, 2, 3])]
        let post = try await author.post(parts, in: conversation)
        // A posted message is inserted, so its snapshot has its parts all the same.
        #expect(try #require(await replication.next()).changes.messages.first { $0.id == post.id }?.snapshot?.parts == parts)

        #expect(try await store.markSent(among: [post.id]) == [post.id])
        let sent = try #require(await replication.next())
        #expect(sent.outbox.map(\.entry.state) == [.sent])
        #expect(sent.outbox.first?.message == nil)

        // Received as a node's storer receives (it reads no change set).
        let delivered = peer.write(.delivered([post.id]), in: conversation, replica: try store.replica, wallMilliseconds: Self.now + 1)
        let applied = try await author.receive(try store.checkSignatures([delivered]), completeChanges: false)
        #expect(applied.report.accepted == [delivered.id])
        let update = try #require(await replication.next()).changes.messages.first { $0.id == post.id && $0.property == .recipientStatus }
        #expect(update?.snapshot?.recipientStatus[peer.user] == .delivered)
        #expect(update?.snapshot?.parts == [])
        // The rows are whole: parts kept, status written.
        let stored = try #require(try store.message(post.id))
        #expect(stored.parts == parts)
        #expect(stored.recipientStatus[peer.user] == .delivered)

        // A caller that reads the change set gets it whole, subscribers or not.
        let readAgain = peer.write(.read([post.id]), in: conversation, replica: try store.replica, wallMilliseconds: Self.now + 2)
        let complete = try await store.apply(received: [readAgain], wallMilliseconds: Self.now + 2)
        #expect(complete.changes.messages.first { $0.id == post.id && $0.property == .recipientStatus }?.snapshot?.parts == parts)
        _ = await replication.next()

        // A subscriber that reads messages: updated messages come back with their parts.
        let full = store.changes().makeAsyncIterator()
        #expect(store.changeBus.wantMessages)
        let second = try await author.post(parts, in: conversation)
        #expect(try await store.markSent(among: [second.id]) == [second.id])
        let deliveredSecond = peer.write(.delivered([second.id]), in: conversation, replica: try store.replica, wallMilliseconds: Self.now + 3)
        _ = try await author.receive(try store.checkSignatures([deliveredSecond]), completeChanges: false)
        for var stream in [full, replication] {
            _ = try #require(await stream.next())  // the post
            #expect(try #require(await stream.next()).outbox.first?.message?.parts == parts)
            let change = try #require(await stream.next()).changes.messages.first { $0.id == second.id && $0.property == .recipientStatus }
            #expect(change?.snapshot?.recipientStatus[peer.user] == .delivered)
            #expect(change?.snapshot?.parts == parts)
        }
    }

    @Test("a batch built without messages skips the subscribers that read them, which learn it from the gap")
    func withoutMessagesSkipsReaders() async throws {
        let store = try Store(directory: nil, localUser: NodeIdentity.generate().publicKey)
        var replication = store.changes(includingMessages: false).makeAsyncIterator()
        var full = store.changes().makeAsyncIterator()
        var summary = Publication()
        summary.stored = StoredRecord(summaries: [LogSummary(conversation: try #require(ConversationID(bytes: [UInt8](repeating: 1, count: 16))))])
        var without = summary
        without.includesMessages = false
        store.changeBus.publish(without)
        store.changeBus.publish(summary)
        #expect(try #require(await replication.next()).number == 1)
        #expect(try #require(await replication.next()).number == 2)
        let next = try #require(await full.next())
        #expect(next.number == 2)
        #expect(next.missedBatches == 1)
    }

    @Test("a subscriber that falls behind keeps only the newest batches and is told how many it missed; the store buffers no more for it")
    func boundedBuffer() async throws {
        let identity = NodeIdentity.generate()
        let store = try Store(directory: nil, localUser: identity.publicKey)
        let author = try LocalAuthor(store: store, identity: identity, wallClock: { Self.now })
        let slow = store.changes()
        let (conversation, _) = try await author.createConversation(with: [NodeIdentity.generate().publicKey])
        let extra = 10
        var posts: [OperationID] = []
        for index in 0..<(Store.changeBufferLimit + extra) {
            posts.append(try await author.post([MessagePart(mimeType: "text/plain", data: [UInt8(index % 256)])], in: conversation).id)
        }
        let total = UInt64(Store.changeBufferLimit + extra + 1)
        #expect(store.latestChangeNumber == total)

        // Subscribed later: starts with the next commit, nothing missed.
        var late = store.changes().makeAsyncIterator()

        var iterator = slow.makeAsyncIterator()
        let first = try #require(await iterator.next())
        #expect(first.missedBatches == extra + 1)
        #expect(first.number == total - UInt64(Store.changeBufferLimit) + 1)
        var numbers = [first.number]
        var last = first
        for _ in 1..<Store.changeBufferLimit {
            last = try #require(await iterator.next())
            #expect(last.missedBatches == 0)
            numbers.append(last.number)
        }
        #expect(numbers == Array((total - UInt64(Store.changeBufferLimit) + 1)...total))
        #expect(last.changes.messages.map(\.id) == [posts.last!])

        try await store.markSent(posts[0])
        let next = try #require(await late.next())
        #expect(next.number == total + 1)
        #expect(next.missedBatches == 0)
        #expect(try #require(await iterator.next()).number == total + 1)
    }

    @Test("a subscriber that stops listening is removed")
    func unsubscribe() async throws {
        let identity = NodeIdentity.generate()
        let store = try Store(directory: nil, localUser: identity.publicKey)
        let author = try LocalAuthor(store: store, identity: identity, wallClock: { Self.now })
        do {
            let stream = store.changes()
            let task = Task { for await _ in stream {} }
            task.cancel()
            await task.value
        }
        _ = try await author.createConversation(with: [NodeIdentity.generate().publicKey])
        let deadline = ContinuousClock.now + .seconds(10)
        while store.changeBus.count > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        #expect(store.changeBus.count == 0)
    }
}
