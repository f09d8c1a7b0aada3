import Testing
import WeftCrypto
@testable import WeftModel

private let alice = Fixtures.users[0]
private let bob = Fixtures.users[1]
private let carol = Fixtures.users[2]
private let dave = Fixtures.users[3]

/// Alice, Bob and Carol in a conversation: Alice posted m1, Bob posted m2 after it. `replica` is
/// Alice's, holding all three operations.
private struct Base {
    var a = Peer(0)
    var b = Peer(1)
    let create: SignedOperation
    let m1: SignedOperation
    let m2: SignedOperation

    init() {
        create = a.create(with: [bob, carol])
        m1 = a.post("m1", in: create.conversation)
        b.receive([create, m1])
        m2 = b.post("m2", in: create.conversation)
        a.receive([m2])
    }

    var id: ConversationID { create.conversation }
    var operations: [SignedOperation] { [create, m1, m2] }
    var replica: Replica { a.replica }
    /// The latest timestamp in the log (m2's).
    var latest: UInt64 { m2.operation.timestamp.rawValue }
}

/// `op` must decode from its wire bytes with a valid signature, be refused for `reason` by
/// `replica` and by a fresh replica that gets it before everything else, and change nothing.
private func expectRefused(
    _ op: SignedOperation, _ reason: OperationError.Reason, by replica: Replica, holding operations: [SignedOperation],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let decoded = try? SignedOperation(wireBytes: op.wireBytes)
    #expect(decoded?.id == op.id, "it must reach the replica", sourceLocation: sourceLocation)
    #expect(op.hasValidSignature, sourceLocation: sourceLocation)

    var replica = replica
    let before = ReplicaDigest(replica)
    let report = replica.apply(verified: [op])
    #expect(report.accepted.isEmpty, sourceLocation: sourceLocation)
    #expect(report.rejected.map(\.0) == [op.id], sourceLocation: sourceLocation)
    #expect(report.rejected.first?.1.reason == reason, "\(report.rejected.first?.1.description ?? "not refused")", sourceLocation: sourceLocation)
    var after = ReplicaDigest(replica)
    #expect(after.rejected == before.rejected.union([op.id]), sourceLocation: sourceLocation)
    after.rejected = before.rejected
    #expect(after == before, "\(after.firstDifference(from: before) ?? "")", sourceLocation: sourceLocation)

    // Again: still refused, still nothing changed.
    let again = replica.apply(verified: [op])
    #expect(again.rejected.map(\.0) == [op.id] && again.accepted.isEmpty, sourceLocation: sourceLocation)

    // First, before its causes: held, then refused once they arrive, the same in the end.
    var fresh = Replica(localUser: replica.localUser)
    _ = fresh.apply(verified: [op])
    _ = fresh.apply(verified: operations.reversed())
    #expect(fresh.rejectedOperations.contains(op.id), sourceLocation: sourceLocation)
    #expect(ReplicaDigest(fresh) == ReplicaDigest(replica), sourceLocation: sourceLocation)
}

// MARK: - Signatures and hashes

@Suite("rejections: signatures and identifiers")
struct SignatureTests {
    @Test("a signature that does not verify: a flipped bit, another key, another operation, a changed encoding")
    func badSignatures() throws {
        let base = Base()
        let good = base.m2
        #expect(good.hasValidSignature)
        let encoding = Array(good.wireBytes.dropLast(64))
        let signature = Array(good.wireBytes.suffix(64))

        var flipped = signature
        flipped[10] ^= 0x01
        let byCarol = Fixtures.identities[2].sign(Array("weft operation v1".utf8) + good.id.bytes)
        let ofAnother = Array(base.m1.wireBytes.suffix(64))
        let noDomain = Fixtures.identities[1].sign(good.id.bytes)
        for forged in [flipped, byCarol, ofAnother, noDomain] {
            let op = try SignedOperation(wireBytes: encoding + forged)
            #expect(!op.hasValidSignature)
        }
        // A byte of the body changed under the original signature: the identifier changes with it.
        var changed = good.wireBytes
        changed[changed.count - 64 - 3] ^= 0x01  // a byte of the text "m2"
        let tampered = try SignedOperation(wireBytes: changed)
        #expect(tampered.id != good.id)
        #expect(!tampered.hasValidSignature)
    }

    @Test("bytes that do not hash to the identifier a peer named are refused as wrong hash")
    func wrongHash() throws {
        let base = Base()
        #expect(throws: OperationError.self) { try SignedOperation(wireBytes: base.m2.wireBytes, claimedID: base.m1.id) }
        do {
            _ = try SignedOperation(wireBytes: base.m2.wireBytes, claimedID: base.m1.id)
        } catch {
            #expect(error.reason == .wrongHash)
        }
        #expect(try SignedOperation(wireBytes: base.m2.wireBytes, claimedID: base.m2.id).id == base.m2.id)
    }
}

// MARK: - §13.1 validity

@Suite("rejections: §13.1 validity")
struct ValidityTests {
    @Test("impossible sequence: a gap, a repeat, a creation not first or with causes, an operation without causes")
    func impossibleSequence() {
        let base = Base()
        let heads = base.replica.heads(of: base.id)
        let t = base.latest + 1
        // Alice's last was 2 (m1): 4 skips 3; 2 repeats it (with m1 in the past).
        expectRefused(forge(0, in: base.id, sequence: 4, timestamp: t, causes: heads, Fixtures.text("gap")), .impossibleSequence,
            by: base.replica, holding: base.operations)
        expectRefused(forge(0, in: base.id, sequence: 2, timestamp: t, causes: heads, Fixtures.text("again")), .impossibleSequence,
            by: base.replica, holding: base.operations)
        // Bob's first operation here was 1 (m2): a sequence of 1 again, after it.
        expectRefused(forge(1, in: base.id, sequence: 1, timestamp: t, causes: heads, Fixtures.text("again")), .impossibleSequence,
            by: base.replica, holding: base.operations)
        expectRefused(forge(0, in: base.id, sequence: 3, timestamp: t, causes: [], Fixtures.text("no causes")), .impossibleSequence,
            by: base.replica, holding: base.operations)
        expectRefused(forgeCreation(3, participants: [carol, dave], sequence: 2), .impossibleSequence,
            by: base.replica, holding: base.operations)
        expectRefused(forgeCreation(3, participants: [carol, dave], causes: [base.m2.id]), .impossibleSequence,
            by: base.replica, holding: base.operations)
    }

    @Test("timestamp not after every cause's")
    func timestampNotAfterCauses() {
        let base = Base()
        let heads = base.replica.heads(of: base.id)
        for timestamp in [base.latest, base.latest - 1, 0] {
            expectRefused(forge(0, in: base.id, sequence: 3, timestamp: timestamp, causes: heads, Fixtures.text("early")),
                .timestampNotAfterCauses, by: base.replica, holding: base.operations)
        }
        // Not after the latest of several causes, though after the others.
        expectRefused(forge(2, in: base.id, sequence: 1, timestamp: base.m1.operation.timestamp.rawValue + 1, causes: [base.m1.id, base.m2.id],
            Fixtures.text("between")), .timestampNotAfterCauses, by: base.replica, holding: base.operations)
    }

    @Test("not a participant: a stranger's operation, a creation that leaves its creator out")
    func notAParticipant() {
        let base = Base()
        let heads = base.replica.heads(of: base.id)
        for body in [Fixtures.text("hello?"), .addParticipants([dave]), .setMetadata(["title": "mine"]), .markAllRead] {
            expectRefused(forge(3, in: base.id, sequence: 1, timestamp: base.latest + 1, causes: heads, body), .notAParticipant,
                by: base.replica, holding: base.operations)
        }
        expectRefused(forgeCreation(3, participants: [alice, bob]), .notAParticipant, by: base.replica, holding: base.operations)
    }

    @Test("receipts and deletions: of something not a message in the causal past, of one's own message, of another's message")
    func references() throws {
        var base = Base()
        let heads = base.replica.heads(of: base.id)
        let t = base.latest + 1
        let refuse = { (op: SignedOperation, reason: OperationError.Reason, replica: Replica, operations: [SignedOperation]) in
            expectRefused(op, reason, by: replica, holding: operations)
        }
        let unknown = OperationID(bytes: [UInt8](repeating: 7, count: 32))!
        for body in [OperationBody.read([base.create.id]), .delivered([base.create.id]), .read([unknown]), .delivered([base.m2.id, unknown])] {
            refuse(forge(2, in: base.id, sequence: 1, timestamp: t, causes: heads, body), .invalidReference, base.replica, base.operations)
        }
        refuse(forge(0, in: base.id, sequence: 3, timestamp: t, causes: heads, .deleteMessage(base.create.id)), .invalidReference,
            base.replica, base.operations)
        refuse(forge(0, in: base.id, sequence: 3, timestamp: t, causes: heads, .deleteMessage(unknown)), .invalidReference,
            base.replica, base.operations)

        // Bob's own message, and Alice's message deleted by Bob.
        refuse(forge(1, in: base.id, sequence: 2, timestamp: t, causes: heads, .read([base.m2.id])), .notPermitted, base.replica, base.operations)
        refuse(forge(1, in: base.id, sequence: 2, timestamp: t, causes: heads, .delivered([base.m1.id, base.m2.id].sorted())), .notPermitted,
            base.replica, base.operations)
        refuse(forge(1, in: base.id, sequence: 2, timestamp: t, causes: heads, .deleteMessage(base.m1.id)), .notPermitted,
            base.replica, base.operations)

        // A message that exists, but not in the receipt's past: Alice posts m3; Bob, not having it, names it.
        let m3 = base.a.post("m3", in: base.id)
        let all = base.operations + [m3]
        refuse(forge(1, in: base.id, sequence: 2, timestamp: m3.operation.timestamp.rawValue + 1, causes: heads, .read([m3.id])),
            .invalidReference, base.a.replica, all)
        refuse(forge(1, in: base.id, sequence: 2, timestamp: m3.operation.timestamp.rawValue + 1, causes: heads, .deleteMessage(m3.id)),
            .invalidReference, base.a.replica, all)
    }

    @Test("a creation whose identifier is not derived from it, or that names an existing conversation, is refused")
    func nonDerivedIdentifier() {
        let base = Base()
        let derived = forgeCreation(2, participants: [carol, dave])
        var other = derived.operation
        other.conversation = ConversationID(bytes: [UInt8](repeating: 9, count: 16))!
        expectRefused(SignedOperation(signing: other, with: Fixtures.identities[2]), .conflictingCreation, by: base.replica, holding: base.operations)
        // Another creation claiming the existing conversation's identifier.
        other.conversation = base.id
        expectRefused(SignedOperation(signing: other, with: Fixtures.identities[2]), .conflictingCreation, by: base.replica, holding: base.operations)
    }

    @Test("an operation following a refused one is refused, whether it arrives before or after it")
    func dependsOnRejected() {
        let base = Base()
        let heads = base.replica.heads(of: base.id)
        let refused = forge(2, in: base.id, sequence: 1, timestamp: base.latest, causes: heads, Fixtures.text("too early"))
        let follower = forge(2, in: base.id, sequence: 2, timestamp: base.latest + 5, causes: [refused.id], Fixtures.text("after it"))
        let grandchild = forge(0, in: base.id, sequence: 3, timestamp: base.latest + 9, causes: [follower.id], Fixtures.text("after that"))
        for order in [[refused, follower, grandchild], [grandchild, follower, refused], [follower, refused, grandchild]] {
            var replica = base.replica
            let before = ReplicaDigest(replica)
            let report = replica.apply(verified: order)
            #expect(report.accepted.isEmpty)
            #expect(Dictionary(uniqueKeysWithValues: report.rejected.map { ($0.0, $0.1.reason) })
                == [refused.id: .timestampNotAfterCauses, follower.id: .dependsOnRejected, grandchild.id: .dependsOnRejected])
            #expect(replica.pendingCount == 0)
            var after = ReplicaDigest(replica)
            after.rejected.subtract([refused.id, follower.id, grandchild.id])
            #expect(after == before)
        }
    }
}

// MARK: - Equivocation

@Suite("rejections: equivocation")
struct EquivocationTests {
    /// Alice writes X; a copy of her node (restored from a backup) writes Y with the same
    /// sequence number. Bob answers X, Carol answers Y, Alice goes on after X, Carol sets
    /// metadata after Y. Bob, having seen the fork, writes again: his answer to X was revoked,
    /// so he reuses its sequence number, which is no equivocation. `clean` are the operations
    /// outside the fork's reach.
    private struct Fork {
        let clean: [SignedOperation]
        let tainted: [SignedOperation]
        let x: SignedOperation
        let y: SignedOperation
        let replyToX: SignedOperation
        let replyToY: SignedOperation
        let bobAfter: SignedOperation

        init() {
            var a = Peer(0), b = Peer(1), c = Peer(2)
            let create = a.create(with: [bob, carol])
            b.receive([create])
            c.receive([create])
            let early = b.post("before the fork", in: create.conversation)
            a.receive([early])
            c.receive([early])
            var restored = a
            x = a.post("X", in: create.conversation)
            y = restored.post("Y", in: create.conversation)
            b.receive([x])
            replyToX = b.post("re: X", in: create.conversation)
            c.receive([y])
            replyToY = c.post("re: Y", in: create.conversation)
            let afterX = a.post("after X", in: create.conversation)
            let carolsTitle = c.write(.setMetadata(["title": "t"]), in: create.conversation)
            b.receive([y, replyToY])
            bobAfter = b.post("after the fork", in: create.conversation)
            clean = [create, early, bobAfter]
            tainted = [x, y, replyToX, replyToY, afterX, carolsTitle]
        }

        var all: [SignedOperation] { clean + tainted }
    }

    @Test("an author whose operation a fork revoked writes again with its sequence number, and is accepted")
    func honestAuthorWritesAgain() {
        let fork = Fork()
        #expect(fork.x.operation.sequence == fork.y.operation.sequence)
        #expect(fork.bobAfter.operation.sequence == fork.replyToX.operation.sequence)
        var replica = Replica(localUser: bob)
        _ = replica.apply(verified: fork.all)
        #expect(replica.isKnown(fork.bobAfter.id, in: fork.clean[0].conversation))
        #expect(replica.texts(in: fork.clean[0].conversation) == ["before the fork", "after the fork"])
    }

    @Test("two forks, one following the other: the same refusals whatever the order of arrival")
    func forkAfterFork() throws {
        // Alice forks (X, Y). Bob writes P, seeing neither, and Q after Y, in one slot.
        var a = Peer(0), b = Peer(1)
        let create = a.create(with: [bob])
        b.receive([create])
        var restored = a
        let x = a.post("X", in: create.conversation)
        let y = restored.post("Y", in: create.conversation)
        var bobsTwin = b
        let p = b.post("P", in: create.conversation)
        bobsTwin.receive([y])
        let q = bobsTwin.post("Q after Y", in: create.conversation)
        #expect(p.operation.sequence == q.operation.sequence)
        let all = [create, x, y, p, q]
        var outcomes: Set<[OperationID]> = []
        for order in permutations(all) {
            var replica = Replica(localUser: alice)
            replica.applyEach(order)
            outcomes.insert(replica.acceptedOperations.sorted())
            #expect(replica.rejectedOperations.isSuperset(of: [x.id, y.id, q.id]))
        }
        #expect(outcomes.count == 1)
    }

    @Test("both operations of a slot and everything after them are refused, whatever the order of arrival")
    func forkRefusesBothAndDescendants() throws {
        let fork = Fork()
        var expected = Replica(localUser: alice)
        _ = expected.apply(verified: fork.clean)
        var rng = SeededGenerator(seed: 7)
        for round in 0..<40 {
            var order = fork.all.shuffled(using: &rng)
            if round % 3 == 0 { order += order.prefix(4) }
            var replica = Replica(localUser: alice)
            if round % 2 == 0 { _ = replica.apply(verified: order) } else { replica.applyEach(order) }
            #expect(replica.acceptedOperations == Set(fork.clean.map(\.id)), "round \(round)")
            #expect(replica.rejectedOperations == Set(fork.tainted.map(\.id)), "round \(round)")
            #expect(replica.pendingCount == 0)
            var digest = ReplicaDigest(replica)
            digest.rejected = []
            #expect(digest == ReplicaDigest(expected), "round \(round): \(digest.firstDifference(from: ReplicaDigest(expected)) ?? "")")
        }
    }

    @Test("operations accepted before the fork was seen are revoked and reported so")
    func revokedReported() throws {
        let fork = Fork()
        var replica = Replica(localUser: alice)
        let first = replica.apply(verified: Array(fork.clean.prefix(2)) + [fork.x, fork.replyToX])
        #expect(first.accepted.count == 4)
        #expect(replica.texts(in: fork.clean[0].conversation) == ["before the fork", "X", "re: X"])
        #expect(first.revoked.isEmpty)
        let second = replica.apply(verified: [fork.y])
        #expect(second.revoked == [fork.x.id, fork.replyToX.id].sorted())
        #expect(Set(second.rejected.map(\.0)) == [fork.y.id, fork.x.id, fork.replyToX.id])
        #expect(second.rejected.allSatisfy { $0.1.reason == .equivocation })
        #expect(second.accepted.isEmpty)
        #expect(second.touched == [fork.clean[0].conversation])
        #expect(replica.texts(in: fork.clean[0].conversation) == ["before the fork"])

        // In one batch: what the batch accepted and the fork then revoked is not reported accepted.
        var batch = Replica(localUser: alice)
        let report = batch.apply(verified: Array(fork.clean.prefix(2)) + [fork.x, fork.replyToX, fork.y])
        #expect(Set(report.accepted) == Set(fork.clean.prefix(2).map(\.id)))
        #expect(Set(report.revoked) == [fork.x.id, fork.replyToX.id])
    }

    @Test("a revocation reaches readers as a change set: the revoked messages are deleted")
    func revocationChangeSet() throws {
        let fork = Fork()
        var replica = Replica(localUser: alice)
        _ = replica.apply(verified: Array(fork.clean.prefix(2)) + [fork.x, fork.replyToX])
        let (report, changes) = replica.applyReportingChanges(verified: [fork.y])
        #expect(Set(report.revoked) == [fork.x.id, fork.replyToX.id])
        #expect(Set(changes.messages.filter { $0.kind == .delete }.map(\.id)) == [fork.x.id, fork.replyToX.id])
        #expect(changes.messages.allSatisfy { $0.kind == .delete })
        #expect(changes.conversations.contains { $0.property == .messageCount && $0.newValue == .int(1) })
    }

    @Test("an operation waiting for a forking operation is decided when it arrives")
    func waiterOfForkDecided() {
        let fork = Fork()
        var replica = Replica(localUser: alice)
        _ = replica.apply(verified: Array(fork.clean.prefix(2)) + [fork.x])
        // Carol's answer to Y arrives before Y: it waits; Y forks the slot; the answer is refused.
        let waiting = fork.replyToY
        #expect(replica.apply(verified: [waiting]).pending == [waiting.id])
        let report = replica.apply(verified: [fork.y])
        #expect(Set(report.rejected.map(\.0)) == [fork.y.id, fork.x.id, waiting.id])
        #expect(replica.pendingCount == 0)
    }

    @Test("refusals made before a fork is found still stand after it")
    func refusalsSurviveFork() {
        let fork = Fork()
        var replica = Replica(localUser: alice)
        _ = replica.apply(verified: Array(fork.clean.prefix(2)) + [fork.x])
        let heads = replica.heads(of: fork.clean[0].conversation)
        let stranger = forge(3, in: fork.clean[0].conversation, sequence: 1, timestamp: fork.x.operation.timestamp.rawValue + 1, causes: heads,
            Fixtures.text("stranger"))
        _ = replica.apply(verified: [stranger, fork.y])
        #expect(replica.rejectedOperations.contains(stranger.id))
        // Something following the stranger's refused operation is still refused, not held.
        let follower = forge(3, in: fork.clean[0].conversation, sequence: 2, timestamp: fork.x.operation.timestamp.rawValue + 2,
            causes: [stranger.id], Fixtures.text("again"))
        #expect(replica.apply(verified: [follower]).rejected.map(\.1.reason) == [.dependsOnRejected])
    }
}

/// Every order of `items` (for a handful of items).
func permutations<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    return items.indices.flatMap { index in
        var rest = items
        let first = rest.remove(at: index)
        return permutations(rest).map { [first] + $0 }
    }
}
