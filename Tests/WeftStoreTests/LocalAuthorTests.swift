import Foundation
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("LocalAuthor: received operations are acknowledged and announced by the store alone")
struct LocalAuthorTests {
    static let now: UInt64 = 1_700_000_000_000

    static func text(_ s: String) -> OperationBody {
        .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(s.utf8))], options: .init())
    }

    /// A peer's operations, written against its own replica: two conversations with the local
    /// user (two logs), messages in both, and one message by the local user's other contact.
    static func peerOperations(from peer: inout Author, to local: UserID, messages: Int, logs logCount: Int = 2) -> [SignedOperation] {
        var world = Replica(localUser: peer.user)
        var operations: [SignedOperation] = []
        func add(_ op: SignedOperation) {
            _ = world.apply(verified: [op])
            operations.append(op)
        }
        var now = Self.now
        for _ in 0..<logCount {
            add(peer.createConversation(with: [local], distinct: false, in: world, wallMilliseconds: now))
        }
        let logs = world.conversationIDs
        for index in 0..<messages {
            now += 1
            add(peer.write(text("m\(index)"), in: logs[index % logs.count], replica: world, wallMilliseconds: now))
        }
        return operations
    }

    @Test("concurrent posts share commits: every one is stored with its outbox entry, each log's chain has no gap, the tables equal the replica rebuilt from the log")
    func groupCommit() async throws {
        let localIdentity = NodeIdentity.generate()
        let store = try Store(directory: nil, localUser: localIdentity.publicKey)
        let author = try LocalAuthor(store: store, identity: localIdentity, wallClock: { Self.now })
        let others = (0..<2).map { _ in NodeIdentity.generate().publicKey }
        var created: [ConversationID] = []
        for other in others { created.append(try await author.createConversation(with: [other], announce: true).conversation) }
        let logs = created
        let before = store.latestChangeNumber

        let count = 200
        let posted = try await withThrowingTaskGroup(of: (Int, SignedOperation, MessageSnapshot?).self) { group in
            for index in 0..<count {
                group.addTask {
                    let parts = [MessagePart(mimeType: "text/plain", data: Array("m\(index)".utf8))]
                    let result = try await author.postShowing(parts, in: logs[index % 2])
                    return (index, result.post, result.message)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(posted.count == count)
        // Fewer commits than posts: some shared one (all 200 tasks were started together).
        #expect(store.latestChangeNumber - before < UInt64(count))
        for (index, post, message) in posted {
            #expect(post.operation.conversation == logs[index % 2])
            #expect(message?.id == post.id)
            #expect(message?.parts.first?.data == Array("m\(index)".utf8))
            // The snapshot handed back is the message as the store shows it (later posts only
            // append after it, so nothing about it moved).
            #expect(try store.message(post.id) == message)
        }
        for log in logs {
            let sequences = posted.map(\.1.operation).filter { $0.conversation == log }.map(\.sequence).sorted()
            #expect(sequences == Array(2...UInt64(count / 2 + 1)), "creation is 1; the posts follow without a gap")
        }
        #expect(Set(try store.outbox().map(\.message)) == Set(posted.map(\.1.id)))
        var reference = Replica(localUser: localIdentity.publicKey)
        _ = reference.applyReportingChanges(verified: try logs.flatMap { try store.operations(in: $0) })
        try expectStore(store, matches: reference)
    }

    @Test("applying received operations through the local author alone writes the local user's delivered receipts in the same commit, one per log, and publishes one change batch")
    func deliveredInTheSameCommit() async throws {
        let localIdentity = NodeIdentity.generate()
        var peer = Author(identity: .generate())
        let store = try Store(directory: nil, localUser: localIdentity.publicKey)
        let author = try LocalAuthor(store: store, identity: localIdentity, wallClock: { Self.now + 10_000 })
        var changes = store.changes().makeAsyncIterator()
        let operations = Self.peerOperations(from: &peer, to: localIdentity.publicKey, messages: 6)

        let applied = try await author.receive(operations)
        #expect(applied.refused.isEmpty)
        #expect(applied.report.accepted.count == operations.count)
        // One receipt per conversation log, naming that log's new messages, by the local user.
        let posts = operations.filter { $0.operation.body.kind == 5 }
        #expect(applied.acknowledgements.count == 2)
        for receipt in applied.acknowledgements {
            #expect(receipt.operation.author == localIdentity.publicKey)
            let expected = posts.filter { $0.operation.conversation == receipt.operation.conversation }.map(\.id).sorted()
            #expect(receipt.operation.body == .delivered(expected))
            #expect(try store.operations(in: receipt.operation.conversation).map(\.id).contains(receipt.id))
        }
        for post in posts {
            #expect(try store.message(post.id)?.recipientStatus == [localIdentity.publicKey: .delivered])
        }

        // One batch for the commit, reporting each message once, as it is now (delivered).
        #expect(store.latestChangeNumber == 1)
        let batch = try #require(await changes.next())
        #expect(batch.number == 1)
        #expect(batch.missedBatches == 0)
        #expect(batch.changes == applied.changes)
        #expect(batch.changes.messages.count == posts.count)
        #expect(batch.changes.messages.allSatisfy { $0.kind == .create && $0.snapshot?.recipientStatus[localIdentity.publicKey] == .delivered })

        // Exactly what one batch of the peer's operations and the receipts reports, and the
        // tables equal that replica.
        var reference = Replica(localUser: localIdentity.publicKey)
        let (report, expected) = reference.applyReportingChanges(verified: operations + applied.acknowledgements, onlyShown: true)
        #expect(report.accepted.count == operations.count + 2)
        #expect(applied.changes == expected)
        try expectStore(store, matches: reference)

        // Sent again: nothing new, no receipt, no batch.
        let again = try await author.receive(operations)
        #expect(again.acknowledgements.isEmpty)
        #expect(store.latestChangeNumber == 1)
    }

    @Test("more new messages in one log than a receipt names: receipts in sequence, all accepted")
    func receiptsPastTheLimit() async throws {
        let localIdentity = NodeIdentity.generate()
        var peer = Author(identity: .generate())
        let store = try Store(directory: nil, localUser: localIdentity.publicKey)
        let author = try LocalAuthor(store: store, identity: localIdentity, wallClock: { Self.now + 100_000 })
        let operations = Self.peerOperations(from: &peer, to: localIdentity.publicKey, messages: Store.receiptLimit + 2, logs: 1)
        let applied = try await author.receive(operations)
        #expect(applied.acknowledgements.count == 2)
        let counts = applied.acknowledgements.map { receipt -> Int in
            guard case .delivered(let ids) = receipt.operation.body else { return 0 }
            return ids.count
        }
        #expect(counts == [Store.receiptLimit, 2])
        #expect(applied.acknowledgements.map(\.operation.sequence) == [1, 2])
        #expect(applied.acknowledgements[1].operation.causes == [applied.acknowledgements[0].id])
        #expect(try store.operationCounts() == (operations.count + 2, 0, 0))
        #expect(try store.count(MessageQuery([.init(.isUnread, .equal, .bool(true))])) == Store.receiptLimit + 2)
        let statuses = try await store.database.read { db in
            try Int.fetchAll(db, sql: "SELECT status FROM receipt")
        }
        #expect(statuses.count == Store.receiptLimit + 2)
        #expect(statuses.allSatisfy { $0 == RecipientStatus.delivered.rawValue })
    }

    @Test("the local user's own messages coming back, and messages in a conversation the local user is not in, get no receipt")
    func notAddressedToTheLocalUser() async throws {
        let localIdentity = NodeIdentity.generate()
        var me = Author(identity: localIdentity)
        var peer = Author(identity: .generate())
        let stranger = NodeIdentity.generate().publicKey
        var world = Replica(localUser: nil)
        var operations: [SignedOperation] = []
        func add(_ op: SignedOperation) {
            _ = world.apply(verified: [op])
            operations.append(op)
        }
        add(me.createConversation(with: [peer.user], in: world, wallMilliseconds: Self.now))
        add(me.write(Self.text("mine"), in: operations[0].operation.conversation, replica: world, wallMilliseconds: Self.now + 1))
        add(peer.createConversation(with: [stranger], in: world, wallMilliseconds: Self.now + 2))
        add(peer.write(Self.text("theirs"), in: operations[2].operation.conversation, replica: world, wallMilliseconds: Self.now + 3))
        let store = try Store(directory: nil, localUser: localIdentity.publicKey)
        let author = try LocalAuthor(store: store, identity: localIdentity, wallClock: { Self.now + 10 })
        let applied = try await author.receive(operations)
        #expect(applied.report.accepted.count == 4)
        #expect(applied.acknowledgements.isEmpty)
    }

    @Test("a local author belongs to the store's local user; bodies beyond the encoding's limits are refused before anything is encoded")
    func identityAndLimits() async throws {
        let localIdentity = NodeIdentity.generate()
        let store = try Store(directory: nil, localUser: localIdentity.publicKey)
        let wrong = #expect(throws: StoreError.self) { try LocalAuthor(store: store, identity: .generate()) }
        #expect(wrong?.code == .wrongLocalUser)
        let author = try LocalAuthor(store: store, identity: localIdentity)
        let (conversation, created) = try await author.createConversation(with: [NodeIdentity.generate().publicKey])
        #expect(created)
        let many = (0..<(Operation.maxItems + 1)).map { PublicIdentity(unvalidatedBytes: [UInt8](repeating: 0, count: 28) + withUnsafeBytes(of: UInt32($0).bigEndian, Array.init)) }
        let error = await #expect(throws: StoreError.self) { try await author.write(.addParticipants(many), in: [conversation]) }
        #expect(error?.code == .tooLarge)
        #expect(error?.message.contains("4097 users") == true)
        let again = try await author.createConversation(with: Set(try store.conversation(conversation)!.participants).subtracting([localIdentity.publicKey]))
        #expect(again.conversation == conversation)
        #expect(!again.created)
        #expect(try store.operationCounts() == (1, 0, 0))
    }
}
