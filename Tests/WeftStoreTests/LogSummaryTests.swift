import Foundation
import GRDB
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("Store: log summaries, kept in the write transaction, and the operations a peer lacks")
struct LogSummaryTests {
    static let now: UInt64 = 1_800_000_000_000

    /// What a scan of the operation table says, publication aside (the operations do not say it).
    static func scanned(_ store: Store) throws -> [ConversationID: LogSummary] {
        try store.database.unsafeReentrantRead { db in try LogSummaryTable.scan(db).mapValues(\.summary) }
    }

    static func expectSummariesMatchScan(_ store: Store, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let scan = try scanned(store)
        let kept = try store.logSummaries().filter { !$0.isPruned }
        #expect(kept.map(\.conversation) == scan.keys.sorted(), "logs summarized", sourceLocation: sourceLocation)
        for summary in kept {
            var expected = try #require(scan[summary.conversation], sourceLocation: sourceLocation)
            expected.isPublished = summary.isPublished
            #expect(summary == expected, "summary of \(summary.conversation)", sourceLocation: sourceLocation)
        }
    }

    static func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("weft-summary-\(UUID().uuidString)")
    }

    @Test(
        "after random batches (out of order, duplicates, pending, rejected, local receipts) and a reopen, the summaries equal a scan of the operation table, and each commit reports the new ones",
        arguments: [UInt64(7), 42])
    func summariesEqualAScan(seed: UInt64) async throws {
        var workload = Workload(seed: seed)
        workload.run(steps: 150)
        workload.gossipAll()
        // The node's clock just after the workload's: every operation is recent enough to
        // wait for its causes (`Store.pendingLifetime`) and none is from the future.
        let now = workload.now + 1_000
        let localIdentity = NodeIdentity.generate()
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var store = try Store(directory: directory, localUser: localIdentity.publicKey)
        var author = try LocalAuthor(store: store, identity: localIdentity, wallClock: { now })

        // An outsider writing into a conversation: stored, rejected (not a participant).
        var outsider = Author(identity: .generate())
        let world = workload.replicas[0]
        let rejected = world.conversationIDs.prefix(2).map {
            outsider.write(LogSummaryTests.text("intruding"), in: $0, replica: world, wallMilliseconds: now - 1000)
        }

        var rng = SeededGenerator(seed: seed)
        var pool = workload.operations.shuffled(using: &rng) + rejected
        var sent: [SignedOperation] = []
        var round = 0
        while !pool.isEmpty {
            round += 1
            let count = Int.random(in: 1...25, using: &rng)
            var batch = Array(pool.prefix(count))
            pool.removeFirst(min(count, pool.count))
            // Duplicates: some sent before, and one repeated within the batch.
            batch += sent.shuffled(using: &rng).prefix(Int.random(in: 0...3, using: &rng))
            if let first = batch.first, Bool.random(using: &rng) { batch.append(first) }
            let held = Set(try await store.database.read { db in try Data.fetchAll(db, sql: "SELECT id FROM operation") })
            var changes = store.changes().makeAsyncIterator()

            let applied = try await author.receive(batch)
            sent += batch

            #expect(applied.refused.isEmpty)
            let fresh = batch.filter { !held.contains(Data($0.id.bytes)) }
            #expect(Set(applied.newOperations) == Set(fresh.map(\.id)))
            #expect(applied.newCount + applied.duplicateCount == batch.count)
            let pending = try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM operation WHERE status = 'pending'") }
            #expect(applied.pendingCount <= pending ?? 0)
            // Everything stored for the first time goes to the mesh (received logs are published).
            #expect(Set(applied.storedOperations.map(\.id)) == Set(fresh.map(\.id)).union(applied.acknowledgements.map(\.id)))
            for summary in applied.summaries {
                #expect(try store.logSummary(of: summary.conversation) == summary)
                #expect(summary.isPublished)
            }
            if !fresh.isEmpty {
                let batchChanges = try #require(await changes.next())
                #expect(batchChanges.summaries == applied.summaries)
                #expect(batchChanges.storedOperations == applied.storedOperations)
            }
            try Self.expectSummariesMatchScan(store)

            if round == 5 {
                // Reopened: the tables are on disk, not in memory.
                store = try Store(directory: directory, localUser: localIdentity.publicKey)
                author = try LocalAuthor(store: store, identity: localIdentity, wallClock: { now })
                try Self.expectSummariesMatchScan(store)
            }
        }
        let counts = try store.operationCounts()
        #expect(counts.rejected >= rejected.count)
        #expect(try store.logSummaries().map(\.operationCount).reduce(0, +) == counts.accepted + counts.pending + counts.rejected)
    }

    static func text(_ s: String) -> OperationBody {
        .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(s.utf8))], options: .init())
    }

    @Test("a store written before the summaries existed gets them from the migration: a scan, published where a message or a peer's operation is")
    func migrationFillsThem() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = NodeIdentity.generate()
        var peer = Author(identity: .generate())
        let store = try Store(directory: directory, localUser: local.publicKey)
        let author = try LocalAuthor(store: store, identity: local, wallClock: { Self.now })
        let quiet = try await author.createConversation(with: [peer.user], distinct: false).conversation
        let chatty = try await author.createConversation(with: [peer.user], distinct: false).conversation
        _ = try await author.post([MessagePart(mimeType: "text/plain", data: [1])], in: chatty)
        let theirs = peer.createConversation(with: [local.publicKey], in: Replica(localUser: nil), wallMilliseconds: Self.now)
        _ = try await author.receive([theirs])
        let before = try store.logSummaries()

        // Back to the schema before: the tables and the migration's record gone.
        try await store.database.write { db in
            try db.execute(sql: """
                DROP TABLE log_summary; DROP TABLE log_head; DROP TABLE log_gap;
                DELETE FROM grdb_migrations WHERE identifier = 'v2: log summaries';
                """)
        }
        let reopened = try Store(directory: directory, localUser: local.publicKey)
        let after = try reopened.logSummaries()
        #expect(after == before)
        #expect(after.first { $0.conversation == quiet }?.isPublished == false)
        #expect(after.first { $0.conversation == chatty }?.isPublished == true)
        #expect(after.first { $0.conversation == theirs.operation.conversation }?.isPublished == true)
        try Self.expectSummariesMatchScan(reopened)
    }

    @Test("operations beyond a peer's heads come in causal order, limited; by identifier, in the order asked")
    func operationsAPeerLacks() async throws {
        let local = NodeIdentity.generate()
        var peer = Author(identity: .generate())
        let store = try Store(directory: nil, localUser: local.publicKey)
        let author = try LocalAuthor(store: store, identity: local, wallClock: { Self.now })
        var world = Replica(localUser: peer.user)
        var ops: [SignedOperation] = []
        func add(_ op: SignedOperation) {
            _ = world.apply(verified: [op])
            ops.append(op)
        }
        add(peer.createConversation(with: [local.publicKey], distinct: false, in: world, wallMilliseconds: Self.now))
        let id = ops[0].operation.conversation
        for index in 0..<5 { add(peer.write(Self.text("p\(index)"), in: id, replica: world, wallMilliseconds: Self.now + UInt64(index))) }
        let applied = try await author.receive(ops)
        let receipt = try #require(applied.acknowledgements.first)
        let all = try store.operations(in: id, beyond: VersionVector(), limit: 100)
        #expect(all.map(\.id) == ops.map(\.id) + [receipt.id])

        var heads = VersionVector()
        heads.set(peer.user, 3)
        #expect(try store.operations(in: id, beyond: heads, limit: 100).map(\.id) == ops[3...].map(\.id) + [receipt.id])
        #expect(try store.operations(in: id, beyond: heads, limit: 2).map(\.id) == ops[3...4].map(\.id))
        heads.set(local.publicKey, 1)
        #expect(try store.operations(in: id, beyond: heads, limit: 100).map(\.id) == ops[3...].map(\.id))
        #expect(try store.operations(in: id, beyond: heads, limit: 0).isEmpty)

        let summary = try #require(try store.logSummary(of: id))
        #expect(summary.heads[peer.user] == 6)
        #expect(summary.heads[local.publicKey] == 1)
        #expect(summary.operationCount == 7)
        #expect(summary.digest == SetDigest(ops.map(\.id) + [receipt.id]))

        let unknown = OperationID(bytes: [UInt8](repeating: 9, count: 32))!
        #expect(try store.operations(ids: [ops[4].id, unknown, ops[1].id]).map(\.id) == [ops[4].id, ops[1].id])
    }

    @Test("a head waits at a gap and walks over what arrived past it once the gap fills")
    func headsOverGaps() async throws {
        let local = NodeIdentity.generate()
        var peer = Author(identity: .generate())
        let store = try Store(directory: nil, localUser: local.publicKey)
        var world = Replica(localUser: peer.user)
        var ops: [SignedOperation] = []
        ops.append(peer.createConversation(with: [local.publicKey], distinct: false, in: world, wallMilliseconds: Self.now))
        _ = world.apply(verified: ops)
        let id = ops[0].operation.conversation
        for index in 0..<4 {
            let op = peer.write(Self.text("p\(index)"), in: id, replica: world, wallMilliseconds: Self.now + UInt64(index))
            _ = world.apply(verified: [op])
            ops.append(op)
        }
        _ = try await store.apply(received: [ops[0], ops[3], ops[4]], wallMilliseconds: Self.now)
        #expect(try store.logSummary(of: id)?.heads[peer.user] == 1)
        #expect(try store.logSummary(of: id)?.operationCount == 3)
        _ = try await store.apply(received: [ops[2]], wallMilliseconds: Self.now)
        #expect(try store.logSummary(of: id)?.heads[peer.user] == 1)
        _ = try await store.apply(received: [ops[1]], wallMilliseconds: Self.now)
        #expect(try store.logSummary(of: id)?.heads[peer.user] == 5)
        try Self.expectSummariesMatchScan(store)
        let gaps = try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM log_gap") }
        #expect(gaps == 0)
    }
}
