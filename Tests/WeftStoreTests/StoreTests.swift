import Foundation
import GRDB
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("Store: writes, materialization, reopening")
struct StoreTests {
    /// The workload's operations in random batches, shuffled (so many wait for their causes),
    /// with some sent twice.
    static func batches(of workload: Workload, seed: UInt64) -> [[SignedOperation]] {
        var rng = SeededGenerator(seed: seed)
        var ops = workload.operations
        // Shuffle within windows: causes often arrive after what depends on them.
        for start in stride(from: 0, to: ops.count, by: 40) {
            ops[start..<min(ops.count, start + 40)].shuffle(using: &rng)
        }
        var batches: [[SignedOperation]] = []
        var index = 0
        while index < ops.count {
            let size = Int.random(in: 1...60, using: &rng)
            var batch = Array(ops[index..<min(ops.count, index + size)])
            if let again = ops[..<index].randomElement(using: &rng), Bool.random(using: &rng) { batch.append(again) }
            batches.append(batch)
            index += size
        }
        return batches
    }

    @Test(
        "after a random workload (merges, membership, metadata, receipts, deletions, out-of-order batches) the tables equal the replica, field by field",
        arguments: [1, 2, 3] as [UInt64])
    func randomWorkload(seed: UInt64) async throws {
        var workload = Workload(seed: seed)
        workload.run(steps: 400)
        workload.gossipAll()
        let local = workload.users[0]
        let store = try Store(directory: nil, localUser: local)
        var reference = Replica(localUser: local)
        for (index, batch) in Self.batches(of: workload, seed: seed).enumerated() {
            let applied = try await store.apply(received: batch, wallMilliseconds: workload.now)
            let (report, changes) = reference.applyReportingChanges(verified: batch, onlyShown: true)
            #expect(applied.refused.isEmpty)
            #expect(applied.report.accepted == report.accepted)
            #expect(applied.report.pending == report.pending)
            #expect(applied.changes == changes, "the change set of batch \(index)")
            if index % 10 == 0 { try expectStore(store, matches: reference) }
        }
        try expectStore(store, matches: reference)
        #expect(reference.pendingCount == 0)
        // The workload's users all agree on it too.
        #expect(reference.conversations.map(\.id) == workload.replicas[0].conversations.map(\.id))
        #expect(reference.conversations.contains { !$0.mergedIDs.isEmpty }, "the workload merged conversations")
        let counts = try store.operationCounts()
        #expect(counts.accepted + counts.rejected == Set(workload.operations.map(\.id)).count)
        #expect(counts.pending == 0)
    }

    @Test("a store reopened from disk reads the same without building its replica; the replica it rebuilds from the log equals the one that wrote it")
    func reopen() async throws {
        let directory = try TemporaryDirectory()
        var workload = Workload(seed: 7)
        workload.run(steps: 300)
        workload.gossipAll()
        let local = workload.users[0]
        var reference = Replica(localUser: local)
        let batches = Self.batches(of: workload, seed: 7)
        let half = batches.count / 2
        do {
            let store = try Store(directory: directory.url, localUser: local)
            for batch in batches[..<half] {
                _ = try await store.apply(received: batch, wallMilliseconds: workload.now)
                _ = reference.apply(verified: batch)
            }
        }
        #expect(FileManager.default.fileExists(atPath: directory.url.appendingPathComponent("weft.sqlite").path))
        let store = try Store(directory: directory.url, localUser: local)
        try expectStore(store, matches: reference)
        let rebuilt = try store.replica
        #expect(rebuilt.conversations == reference.conversations)
        #expect(rebuilt.pendingCount == reference.pendingCount)
        for conversation in reference.conversationIDs {
            #expect(rebuilt.messages(in: conversation) == reference.messages(in: conversation))
            #expect(rebuilt.heads(of: conversation) == reference.heads(of: conversation))
        }
        for batch in batches[half...] {
            _ = try await store.apply(received: batch, wallMilliseconds: workload.now)
            _ = reference.apply(verified: batch)
        }
        try expectStore(store, matches: reference)
    }

    @Test("the accepted operations of a conversation, in applied order, rebuild it; pending ones become accepted when their causes arrive")
    func operationLog() async throws {
        var workload = Workload(seed: 11)
        workload.run(steps: 150)
        workload.gossipAll()
        let store = try Store(directory: nil, localUser: workload.users[0])
        // Everything backwards: all but the creations wait.
        let backwards = Array(workload.operations.reversed())
        let first = try await store.apply(received: Array(backwards.prefix(backwards.count / 2)), wallMilliseconds: workload.now)
        #expect(!first.report.pending.isEmpty)
        #expect(try store.operationCounts().pending == first.report.pending.count)
        _ = try await store.apply(received: Array(backwards.suffix(from: backwards.count / 2)), wallMilliseconds: workload.now)
        #expect(try store.operationCounts().pending == 0)

        let reference = try store.replica
        var replayed = Replica(localUser: workload.users[0])
        for conversation in Set(workload.operations.map(\.operation.conversation)).sorted() {
            let log = try store.operations(in: conversation)
            #expect(log.allSatisfy { reference.isKnown($0.id, in: conversation) })
            // In causal order: each conversation's log applies in one pass with nothing pending.
            let report = replayed.apply(verified: log)
            #expect(report.accepted == log.map(\.id))
            #expect(report.pending.isEmpty)
        }
        #expect(replayed.conversations.map { ($0.id, $0.messageCount) }.elementsEqual(reference.conversations.map { ($0.id, $0.messageCount) }, by: ==))
    }

    @Test("signatures checked before the commit: the checked batch refuses a forged operation and stores the rest; a known operation is not checked again")
    func checkedBatches() async throws {
        var alice = Author(identity: .generate())
        let bob = NodeIdentity.generate().publicKey
        let store = try Store(directory: nil, localUser: bob)
        let now: UInt64 = 1_700_000_000_000
        let create = alice.createConversation(with: [bob], in: try store.replica, wallMilliseconds: now)
        var replica = Replica(localUser: bob)
        _ = replica.apply(verified: [create])
        let post = alice.write(
            .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [1])], options: .init()),
            in: create.operation.conversation, replica: replica, wallMilliseconds: now + 1)

        let checked = try await store.checkSignatures([create, post.withBadSignature])
        #expect(checked.operations.map(\.id) == [create.id, post.id])
        let applied = try await store.apply(received: checked, wallMilliseconds: now + 2)
        #expect(applied.report.accepted == [create.id])
        #expect(applied.refused.map(\.operation) == [post.id])
        #expect(applied.refused.first?.error.reason == .badSignature)

        // Accepted already: a copy with a broken signature is the same operation (its
        // identifier covers the signed bytes only), known, so it passes as a duplicate.
        let again = try await store.apply(received: store.checkSignatures([create.withBadSignature]), wallMilliseconds: now + 3)
        #expect(again.refused.isEmpty)
        #expect(again.duplicateCount == 1)
        #expect(try store.operationCounts() == (1, 0, 0))
    }

    @Test("a bad signature or a timestamp beyond the tolerance is refused with its reason and not stored; it is accepted when offered again in time")
    func refusals() async throws {
        var alice = Author(identity: .generate())
        let bob = NodeIdentity.generate().publicKey
        let store = try Store(directory: nil, localUser: bob, futureTolerance: 60_000)
        let now: UInt64 = 1_700_000_000_000
        let create = alice.createConversation(with: [bob], in: try store.replica, wallMilliseconds: now)
        let forged = create.withBadSignature
        let applied = try await store.apply(received: [forged], wallMilliseconds: now)
        #expect(applied.refused.map(\.operation) == [create.id])
        #expect(applied.refused.first?.error.reason == .badSignature)
        #expect(applied.report.accepted.isEmpty)
        #expect(try store.operationCounts() == (0, 0, 0))

        _ = try await store.apply(received: [create], wallMilliseconds: now)
        let conversation = create.operation.conversation
        let early = alice.write(
            .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [1])], options: .init()), in: conversation,
            replica: try store.replica, wallMilliseconds: now + 60_001)
        let refused = try await store.apply(received: [early], wallMilliseconds: now)
        #expect(refused.refused.first?.error.reason == .timestampInFuture)
        #expect(refused.refused.first?.error.detail.contains("60001 ms ahead") == true)
        #expect(try store.message(early.id) == nil)
        #expect(try store.operationCounts() == (1, 0, 0))

        let later = try await store.apply(received: [early], wallMilliseconds: now + 1)
        #expect(later.refused.isEmpty)
        #expect(later.report.accepted == [early.id])
        #expect(try store.message(early.id)?.parts == [MessagePart(mimeType: "text/plain", data: [1])])
        #expect(try store.conversation(conversation)?.unreadCount == 1)
    }

    @Test("an equivocation refuses both operations of the forked slot and what follows; the log and the tables follow the rebuilt replica")
    func equivocation() async throws {
        var alice = Author(identity: .generate())
        let bobIdentity = NodeIdentity.generate()
        var bob = Author(identity: bobIdentity)
        let directory = try TemporaryDirectory()
        let store = try Store(directory: directory.url, localUser: alice.user)
        var world = Replica(localUser: alice.user)  // where the operations are written
        var reference = Replica(localUser: alice.user)
        var now: UInt64 = 1_000_000
        let create = alice.createConversation(with: [bob.user], in: world, wallMilliseconds: now)
        _ = world.apply(verified: [create])
        let conversation = create.operation.conversation
        now += 1
        let text = { (s: String) in OperationBody.postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(s.utf8))], options: .init()) }
        let hello = alice.write(text("hello"), in: conversation, replica: world, wallMilliseconds: now)
        _ = world.apply(verified: [hello])
        now += 1
        var twin = bob  // the same author state, used twice: one sequence number, two operations
        let first = bob.write(text("first"), in: conversation, replica: world, wallMilliseconds: now)
        let second = twin.write(text("second"), in: conversation, replica: world, wallMilliseconds: now + 1)
        #expect(first.operation.sequence == second.operation.sequence)

        for batch in [[create, hello], [first], [second]] {
            let applied = try await store.apply(received: batch, wallMilliseconds: now + 10)
            let (_, changes) = reference.applyReportingChanges(verified: batch, onlyShown: true)
            #expect(applied.changes == changes)
            if batch == [first] { #expect(try store.message(first.id) != nil) }
        }
        #expect(try store.message(first.id) == nil)
        #expect(try store.message(second.id) == nil)
        #expect(try store.message(hello.id) != nil)
        try expectStore(store, matches: reference)
        #expect(try store.operations(in: conversation).map(\.id) == [create.id, hello.id])
        #expect(try store.operationCounts() == (2, 0, 2))
        // Reopened, the replica replays the whole log (rejected operations too) and refuses both again.
        let reopened = try Store(directory: directory.url, localUser: alice.user).replica
        #expect(!reopened.isKnown(first.id, in: conversation))
        #expect(!reopened.isKnown(second.id, in: conversation))
        #expect(reopened.conversations == reference.conversations)
    }

    @Test("a store on disk belongs to its local user")
    func wrongLocalUser() async throws {
        let directory = try TemporaryDirectory()
        _ = try Store(directory: directory.url, localUser: NodeIdentity.generate().publicKey)
        let error = #expect(throws: StoreError.self) {
            try Store(directory: directory.url, localUser: NodeIdentity.generate().publicKey)
        }
        #expect(error?.code == .wrongLocalUser)
    }
}

@Suite("Store: each part body once")
struct PartBodyTests {
    @Test("a page of messages carries parts of up to 2048 bytes; a larger one's bytes come from the log when asked for")
    func largePartsStayInTheLog() async throws {
        var alice = Author(identity: .generate())
        let bob = NodeIdentity.generate().publicKey
        let store = try Store(directory: nil, localUser: bob)
        let now: UInt64 = 1_700_000_000_000
        let create = alice.createConversation(with: [bob], in: try store.replica, wallMilliseconds: now)
        _ = try await store.apply(received: [create], wallMilliseconds: now)
        let small = MessagePart(mimeType: "text/plain", data: Array(repeating: 7, count: 2048))
        let large = MessagePart(mimeType: "application/octet-stream", data: (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let post = alice.write(
            .postMessage(parts: [small, large], options: .init()), in: create.operation.conversation,
            replica: try store.replica, wallMilliseconds: now + 1)
        _ = try await store.apply(received: [post], wallMilliseconds: now + 1)
        let fetched = try #require(try await store.fetchMessage(post.id))
        #expect(fetched.parts[0] == small)
        #expect(fetched.parts[1].data.isEmpty && fetched.parts[1].unloadedByteCount == 100_000 && fetched.parts[1].byteCount == 100_000)
        #expect(try await store.fetchPartData(of: post.id, index: 1) == large.data)
        #expect(try await store.fetchPartData(of: post.id, index: 0) == small.data)
        #expect(try await store.fetchPartData(of: post.id, index: 2) == nil)
        // Stored once: the part table holds no copy of the large body.
        let stored = try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT SUM(length(data)) FROM part") }
        #expect(stored == 2048, "the part table holds only the small body")
    }
}
