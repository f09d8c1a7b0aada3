import Testing
import WeftCrypto
@testable import WeftModel

/// Operations waiting for causes: what keeping them costs (counted, not timed: the entries of
/// the pending indexes each step adds or removes), and that dropping them leaves a replica
/// that behaves as if they had never arrived.
@Suite("Replica: pending operations")
struct PendingTests {
    /// An operation of user `index` in `conversation` that waits for a made-up cause, unsigned
    /// (the replica applies verified operations; nothing here checks the signature).
    static func waiting(_ index: Int, in conversation: ConversationID, sequence: UInt64, rng: inout SeededGenerator) -> SignedOperation {
        let cause = OperationID(bytes: (0..<OperationID.byteCount).map { _ in UInt8.random(in: 0...255, using: &rng) })!
        let op = Operation(
            author: Fixtures.users[index], conversation: conversation, sequence: sequence,
            timestamp: HLCTimestamp(rawValue: 1 << 40 + sequence), causes: [cause], body: Fixtures.text("waiting \(sequence)"))
        let encoding = op.encoded()
        let length = UInt32(encoding.count)
        let wire = [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: length >> $0) } + encoding + [UInt8](repeating: 0, count: SignedOperation.signatureByteCount)
        return try! SignedOperation(wireBytes: wire)
    }

    /// The pending indexes agree: each pending operation is listed under its log and under each
    /// cause it waits for, and nothing else is listed anywhere.
    static func expectIndexesAgree(_ replica: Replica, sourceLocation: SourceLocation = #_sourceLocation) {
        var waitingOn: [OperationID: Set<OperationID>] = [:]
        var byConversation: [ConversationID: Set<OperationID>] = [:]
        for (id, held) in replica.pending {
            for cause in held.missing { waitingOn[cause, default: []].insert(id) }
            byConversation[held.signed.operation.conversation, default: []].insert(id)
        }
        #expect(replica.waitingOn == waitingOn, "who waits on what", sourceLocation: sourceLocation)
        #expect(replica.pendingByConversation == byConversation, "pending by log", sourceLocation: sourceLocation)
    }

    /// Two conversations between users 0 and 1, as a partial replica knows them before loading.
    struct TwoLogs {
        var alice = Peer(0)
        let a: SignedOperation
        let b: SignedOperation

        init() {
            a = alice.create(with: [Fixtures.users[1]], distinct: false)
            b = alice.create(with: [Fixtures.users[1]], distinct: false)
        }

        func partialReplica() -> Replica {
            var replica = Replica(localUser: Fixtures.users[0], creations: [a, b])
            replica.load(a.conversation, operations: [a])
            replica.load(b.conversation, operations: [b])
            return replica
        }
    }

    @Test("with 20,000 operations waiting in one log, dropping another log, writing to it and releasing a waiter there cost that log's own, counted in index entries")
    func workFollowsWhatChanges() {
        var logs = TwoLogs()
        var rng = SeededGenerator(seed: 20)
        var replica = logs.partialReplica()
        let crowd = (0..<20_000).map { Self.waiting(1, in: logs.a.conversation, sequence: UInt64($0) + 2, rng: &rng) }
        _ = replica.apply(verified: crowd)
        // Three of B's own: a message waiting for the one before it, and two made-up waiters.
        let first = logs.alice.post("first", in: logs.b.conversation)
        let second = logs.alice.post("second", in: logs.b.conversation)
        let few = [second] + (0..<2).map { Self.waiting(1, in: logs.b.conversation, sequence: UInt64($0) + 2, rng: &rng) }
        _ = replica.apply(verified: few)
        #expect(replica.pendingCount == 20_003)
        #expect(replica.pendingCount(in: logs.a.conversation) == 20_000)

        // Releasing `second`: its entries out (3), the cause's entry (1), nothing of the crowd.
        var work = replica.pendingIndexWork
        let released = replica.apply(verified: [first])
        #expect(Set(released.accepted) == [first.id, second.id])
        #expect(replica.pendingIndexWork - work <= 4)

        // A message in B with the crowd waiting in A: no entry touched.
        work = replica.pendingIndexWork
        let third = logs.alice.post("third", in: logs.b.conversation)
        #expect(replica.apply(verified: [third]).accepted == [third.id])
        #expect(replica.pendingIndexWork == work)

        // Dropping B: its two waiters, three entries each.
        work = replica.pendingIndexWork
        replica.unload([logs.b.conversation])
        #expect(replica.pendingIndexWork - work <= 6)
        #expect(replica.pendingCount == 20_000)
        Self.expectIndexesAgree(replica)

        // Dropping A: the crowd, three entries each: linear, not the crowd times itself.
        work = replica.pendingIndexWork
        replica.unload([logs.a.conversation])
        #expect(replica.pendingIndexWork - work == 3 * 20_000)
        #expect(replica.pendingCount == 0)
        #expect(replica.waitingOn.isEmpty && replica.pendingByConversation.isEmpty)
    }

    @Test("an operation waiting for two causes leaves no trace under the second when the first is refused")
    func refusedCauseClearsTheOtherEntries() {
        var alice = Peer(0)
        let create = alice.create(with: [Fixtures.users[1]])
        let id = create.conversation
        var rng = SeededGenerator(seed: 3)
        let unknown = OperationID(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) })!
        // A cause that will be refused (user 2 is no participant), and a waiter on it and on `unknown`.
        let refused = forge(2, in: id, sequence: 1, timestamp: 1 << 33, causes: [create.id], Fixtures.text("x"))
        let waiter = forge(2, in: id, sequence: 2, timestamp: 1 << 34, causes: [refused.id, unknown].sorted(), Fixtures.text("y"))
        var replica = Replica(localUser: Fixtures.users[0])
        _ = replica.apply(verified: [create, waiter])
        #expect(replica.waitingOn[unknown] == [waiter.id])
        let report = replica.apply(verified: [refused])
        #expect(Set(report.rejected.map(\.0)) == [refused.id, waiter.id])
        #expect(replica.pendingCount == 0)
        #expect(replica.waitingOn.isEmpty, "no entry left under the cause that never came")
    }

    @Test("dropped pending operations are as if never received: what waits on them waits on, the others still apply, and one offered again waits again and applies")
    func droppingIsForgetting() {
        var alice = Peer(0)
        var bob = Peer(1)
        let create = alice.create(with: [bob.user])
        bob.receive([create])
        let id = create.conversation
        let m1 = bob.post("one", in: id)
        let m2 = bob.post("two", in: id)
        let m3 = bob.post("three", in: id)
        let other = alice.post("other", in: id)
        let otherReply = alice.post("other reply", in: id)

        var replica = Replica(localUser: Fixtures.users[0])
        _ = replica.apply(verified: [create])
        // m2 waits for m1, m3 for m2, otherReply for other.
        #expect(Set(replica.apply(verified: [m3, m2, otherReply]).pending) == [m3.id, m2.id, otherReply.id])
        #expect(replica.dropPending([m2.id, m1.id]) == 1, "m1 is not pending: ignored")
        Self.expectIndexesAgree(replica)
        #expect(replica.pendingCount == 2)
        #expect(replica.waitingOn[m2.id] == [m3.id], "m3 still waits for the dropped m2")

        // The one not dropped applies when its cause comes.
        #expect(Set(replica.apply(verified: [other]).accepted) == [other.id, otherReply.id])
        // m1 alone does not bring m2 back; m2 offered again waits no more and releases m3.
        #expect(replica.apply(verified: [m1]).accepted == [m1.id])
        #expect(replica.pendingCount == 1)
        #expect(Set(replica.apply(verified: [m2]).accepted) == [m2.id, m3.id])
        #expect(replica.pendingCount == 0)
        Self.expectIndexesAgree(replica)

        // The same end as a replica that never saw the dropped one pending.
        var reference = Replica(localUser: Fixtures.users[0])
        _ = reference.apply(verified: [create, m1, m2, m3, other, otherReply])
        #expect(ReplicaDigest(replica).firstDifference(from: ReplicaDigest(reference)) == nil)

        // A dropped operation offered again before its cause waits again.
        var again = Replica(localUser: Fixtures.users[0])
        _ = again.apply(verified: [create, m2])
        again.dropPending([m2.id])
        #expect(again.apply(verified: [m2]).pending == [m2.id])
        #expect(again.pendingCount(in: id) == 1)
        Self.expectIndexesAgree(again)
    }

    @Test("random applies, drops and unloads keep the indexes in agreement, and a reloaded log waits as before", arguments: [1, 2, 3] as [UInt64])
    func indexesAgreeThroughout(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var logs = TwoLogs()
        var chain: [SignedOperation] = []
        for index in 0..<40 { chain.append(logs.alice.post("m\(index)", in: index % 2 == 0 ? logs.a.conversation : logs.b.conversation)) }
        var junk: [SignedOperation] = []
        for index in 0..<40 {
            junk.append(Self.waiting(1, in: index % 2 == 0 ? logs.a.conversation : logs.b.conversation, sequence: UInt64(index) + 2, rng: &rng))
        }
        var replica = logs.partialReplica()
        var given: [SignedOperation] = [logs.a, logs.b]
        var pool = (chain + junk).shuffled(using: &rng)
        while !pool.isEmpty {
            let batch = Array(pool.prefix(Int.random(in: 1...5, using: &rng)))
            pool.removeFirst(batch.count)
            _ = replica.apply(verified: batch)
            given += batch
            if rng.chance(0.3), let victim = replica.pending.keys.sorted().first {
                replica.dropPending([victim])
                given.removeAll { $0.id == victim }
            }
            if rng.chance(0.2) {
                let log = Bool.random(using: &rng) ? logs.a.conversation : logs.b.conversation
                let before = replica.pendingCount(in: log)
                replica.unload([log])
                #expect(replica.pendingCount(in: log) == 0)
                // Reloaded from what it was given, in that order: the same waiters wait.
                replica.load(log, operations: given.filter { $0.conversation == log })
                #expect(replica.pendingCount(in: log) == before)
            }
            Self.expectIndexesAgree(replica)
        }
    }

    @Test("a batch in one log takes the incremental path whatever waits in another, with the same change set as comparing everything")
    func incrementalWithPendingElsewhere() {
        var logs = TwoLogs()
        var rng = SeededGenerator(seed: 9)
        var incremental = Replica(localUser: Fixtures.users[0])
        var complete = Replica(localUser: Fixtures.users[0])
        let setup = [logs.a, logs.b] + (0..<50).map { Self.waiting(1, in: logs.a.conversation, sequence: UInt64($0) + 2, rng: &rng) }
        _ = incremental.apply(verified: setup)
        _ = complete.apply(verified: setup)
        let posts = (0..<3).map { logs.alice.post("b\($0)", in: logs.b.conversation) }
        let (report, changes) = incremental.applyReportingChangesIncrementally(verified: posts)
        let (expectedReport, expected) = complete.applyReportingChanges(verified: posts)
        #expect(report.accepted == expectedReport.accepted)
        #expect(changes == expected)
        #expect(incremental.pendingCount(in: logs.a.conversation) == 50)
    }
}
