import Foundation
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("Store: local writes and the outbox")
struct LocalWriteTests {
    static let now: UInt64 = 1_700_000_000_000

    static func text(_ s: String) -> OperationBody {
        .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(s.utf8))], options: .init(notificationText: s))
    }

    @Test("a local message and its outbox entry are written together; sent and failed entries leave the outbox; entries survive reopening")
    func outbox() async throws {
        let directory = try TemporaryDirectory()
        var me = Author(identity: .generate())
        let friend = NodeIdentity.generate().publicKey
        var messages: [SignedOperation] = []
        do {
            let store = try Store(directory: directory.url, localUser: me.user)
            let create = me.createConversation(with: [friend], in: try store.replica, wallMilliseconds: Self.now)
            _ = try await store.commitLocal([create])
            let conversation = create.operation.conversation
            for index in 0..<3 {
                let post = me.write(Self.text("m\(index)"), in: conversation, replica: try store.replica, wallMilliseconds: Self.now + UInt64(index))
                let applied = try await store.commitLocal([post], outbox: [OutboxEntry(posting: post, createdAt: Self.now + UInt64(index))])
                #expect(applied.changes.messages.map(\.kind) == [.create])
                #expect(applied.changes.messages.first?.snapshot?.recipientStatus == [friend: .sent])
                messages.append(post)
            }
            #expect(try store.outbox().map(\.message) == messages.map(\.id))
            try await store.recordAttempt(messages[0].id)
            try await store.markSent(messages[0].id)
            try await store.markFailed(messages[1].id, reason: "the recipient left")
        }
        let store = try Store(directory: directory.url, localUser: me.user)
        let waiting = try store.outbox()
        #expect(waiting.map(\.message) == [messages[2].id])
        #expect(waiting.first?.expiresAt == Self.now + 2 + OutboxEntry.defaultTimeToLive)
        #expect(waiting.first?.attempts == 0)
        let all = try store.outboxEntries()
        #expect(all.map(\.state) == [.sent, .failed(reason: "the recipient left"), .waiting])
        #expect(all.first?.attempts == 1)
        #expect(try await store.expireOutbox(wallMilliseconds: Self.now + OutboxEntry.defaultTimeToLive).isEmpty)
        let expired = try await store.expireOutbox(wallMilliseconds: Self.now + 2 + OutboxEntry.defaultTimeToLive)
        #expect(expired.map(\.message) == [messages[2].id])
        #expect(try store.outbox().isEmpty)
        #expect(try store.message(messages[2].id)?.options.notificationText == "m2")

        let unknown = await #expect(throws: StoreError.self) { try await store.markSent(OperationID(bytes: [UInt8](repeating: 7, count: 32))!) }
        #expect(unknown?.code == .unknownOutboxEntry)
    }

    @Test("a local write built against an older replica is refused before anything changes")
    func staleWrite() async throws {
        var me = Author(identity: .generate())
        let store = try Store(directory: nil, localUser: me.user)
        let create = me.createConversation(with: [NodeIdentity.generate().publicKey], in: try store.replica, wallMilliseconds: Self.now)
        _ = try await store.commitLocal([create])
        let conversation = create.operation.conversation
        let old = try store.replica
        var twin = me
        let one = me.write(Self.text("one"), in: conversation, replica: old, wallMilliseconds: Self.now + 1)
        let other = twin.write(Self.text("other"), in: conversation, replica: old, wallMilliseconds: Self.now + 2)
        _ = try await store.commitLocal([one], outbox: [OutboxEntry(posting: one, createdAt: Self.now)])
        let error = await #expect(throws: StoreError.self) {
            try await store.commitLocal([other], outbox: [OutboxEntry(posting: other, createdAt: Self.now)])
        }
        #expect(error?.code == .staleLocalWrite)
        // The first message stands (an equivocation would have refused it too).
        #expect(try store.message(one.id) != nil)
        #expect(try store.message(other.id) == nil)
        #expect(try store.outbox().map(\.message) == [one.id])
        #expect(try store.operationCounts() == (2, 0, 0))
    }

    @Test("an outbox entry must come with its message; an operation by someone else is not local")
    func invalidLocalBatches() async throws {
        var me = Author(identity: .generate())
        var stranger = Author(identity: .generate())
        let store = try Store(directory: nil, localUser: me.user)
        let create = me.createConversation(with: [stranger.user], in: try store.replica, wallMilliseconds: Self.now)
        let orphan = OutboxEntry(message: OperationID(bytes: [UInt8](repeating: 1, count: 32))!, conversation: create.operation.conversation, createdAt: Self.now)
        let error = await #expect(throws: StoreError.self) { try await store.commitLocal([create], outbox: [orphan]) }
        #expect(error?.code == .outboxWithoutMessage)
        let foreign = stranger.createConversation(with: [me.user], in: try store.replica, wallMilliseconds: Self.now)
        let notLocal = await #expect(throws: StoreError.self) { try await store.commitLocal([foreign]) }
        #expect(notLocal?.code == .localOperationRefused)
        #expect(try store.operationCounts() == (0, 0, 0))
        #expect(try store.conversations(ConversationQuery()).isEmpty)
    }

    @Test("concurrent local writers that build under the store's lock never collide")
    func concurrentBuilders() async throws {
        let identity = NodeIdentity.generate()
        let store = try Store(directory: nil, localUser: identity.publicKey)
        let author = AuthorBox(Author(identity: identity))
        let create = try await store.commitLocal(building: { replica in
            Store.LocalBatch(operations: [author.with { $0.createConversation(with: [NodeIdentity.generate().publicKey], in: replica, wallMilliseconds: Self.now) }])
        })
        let conversation = try #require(create.changes.conversations.first?.id)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask {
                    _ = try await store.commitLocal(building: { replica in
                        let post = author.with { $0.write(Self.text("m\(index)"), in: conversation, replica: replica, wallMilliseconds: Self.now + 1) }
                        return Store.LocalBatch(operations: [post], outbox: [OutboxEntry(posting: post, createdAt: Self.now)])
                    })
                }
            }
            try await group.waitForAll()
        }
        #expect(try store.conversation(conversation)?.messageCount == 40)
        #expect(try store.outbox().count == 40)
        try expectStore(store, matches: try store.replica)
    }
}

/// An author shared between tasks (the clock must not go backwards between writers).
final class AuthorBox: @unchecked Sendable {
    // @unchecked: every access to `author` holds `lock`.
    private var author: Author
    private let lock = NSLock()
    init(_ author: Author) { self.author = author }
    func with<T>(_ body: (inout Author) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&author)
    }
}
