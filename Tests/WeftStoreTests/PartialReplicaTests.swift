import Foundation
import Synchronization
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

/// The store's partial replica (`OperationLog+Loading.swift`): logs loaded when a write needs them and
/// dropped after it, with the same results as a replica holding everything.
@Suite("Store: a partial replica, loaded and trimmed")
struct PartialReplicaTests {
    static let now: UInt64 = 1_700_000_000_000

    @Test(
        "keeping no log between writes (so every write loads its groups again, after a reopen too), the reports, change sets and tables equal a complete replica's",
        arguments: [4, 5] as [UInt64])
    func trimmedAfterEveryWrite(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        var workload = Workload(seed: seed)
        workload.run(steps: 300)
        workload.gossipAll()
        let local = workload.users[0]
        var reference = Replica(localUser: local)
        let batches = StoreTests.batches(of: workload, seed: seed)
        var store = try Store(directory: directory.url, localUser: local, cachedOperationLimit: 0)
        for (index, batch) in batches.enumerated() {
            if index == batches.count / 2 {
                store = try Store(directory: directory.url, localUser: local, cachedOperationLimit: 0)
            }
            let applied = try await store.apply(received: batch, wallMilliseconds: workload.now)
            let (report, changes) = reference.applyReportingChanges(verified: batch, onlyShown: true)
            #expect(applied.report.accepted == report.accepted)
            #expect(applied.report.pending == report.pending)
            #expect(applied.report.rejected.map(\.0) == report.rejected.map(\.0))
            #expect(applied.changes == changes, "the change set of batch \(index)")
            // Only the merge groups the write touched stay in memory.
            var groups: Set<ConversationID> = []
            for id in Set(batch.map(\.operation.conversation)) {
                groups.insert(id)
                if let snapshot = reference.conversation(id) { groups.formUnion([snapshot.id] + snapshot.mergedIDs) }
            }
            #expect(store.operationLog.loadedConversations.isSubset(of: groups), "the logs in memory after batch \(index)")
            if index % 10 == 0 { try expectStore(store, matches: reference) }
        }
        try expectStore(store, matches: reference)
        #expect(reference.conversations.contains { !$0.mergedIDs.isEmpty }, "the workload merged conversations")
    }

    @Test("local writes load the logs they build on: the next sequence number after the log was dropped, and the distinct conversation of a set")
    func localWritesLoadTheirLogs() async throws {
        let directory = try TemporaryDirectory()
        let identity = NodeIdentity.generate()
        let me = LockedAuthor(Author(identity: identity))
        let friend = NodeIdentity.generate().publicKey
        let other = NodeIdentity.generate().publicKey
        let store = try Store(directory: directory.url, localUser: identity.publicKey, cachedOperationLimit: 0)
        // By hand, not through `LocalAuthor`, so a second distinct creation for a set can be made.
        func create(_ with: UserID) async throws -> ConversationID {
            try await store.commitLocal(building: { replica in
                let op = me.author.withLock { $0.createConversation(with: [with], in: replica, wallMilliseconds: Self.now) }
                return (Store.LocalBatch(operations: [op]), op.operation.conversation)
            }).extra
        }
        func post(_ text: String, in conversation: ConversationID) async throws -> Store.Applied {
            try await store.commitLocal(building: { replica in
                let body = OperationBody.postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(text.utf8))], options: .init())
                return Store.LocalBatch(operations: [me.author.withLock { $0.write(body, in: conversation, replica: replica, wallMilliseconds: Self.now) }])
            })
        }
        let withFriend = try await create(friend)
        _ = try await post("one", in: withFriend)
        let withOther = try await create(other)  // drops the log with the friend
        #expect(store.operationLog.loadedConversations == [withOther])
        #expect(try store.replica.distinctConversation(for: [identity.publicKey, friend]) == withFriend)
        let two = try await post("two", in: withFriend)
        #expect(two.report.accepted.count == 1)
        #expect(two.changes.messages.first?.snapshot?.parts == [MessagePart(mimeType: "text/plain", data: Array("two".utf8))])
        // A distinct creation for the same set joins the existing conversation's group.
        _ = try await create(other)  // drops the log with the friend again
        let twin = try await create(friend)
        #expect(twin != withFriend)
        #expect(try store.conversation(withFriend)?.mergedIDs == [twin])
        #expect(try store.conversation(withFriend)?.messageCount == 2)
        try expectStore(store, matches: try store.replica)
    }
}

/// The test's author, shared with the store's `@Sendable` builders.
final class LockedAuthor: Sendable {
    let author: Mutex<Author>
    init(_ author: Author) { self.author = Mutex(author) }
}
