import Testing
import WeftCrypto
@testable import WeftModel

private let alice = Fixtures.users[0]
private let bob = Fixtures.users[1]
private let carol = Fixtures.users[2]
private let dave = Fixtures.users[3]

/// Feeds `operations` to a fresh replica in every order given, and returns the replicas.
private func replicas(fedWith operations: [SignedOperation], orders: Int = 6, localUser: UserID = alice) -> [Replica] {
    var rng = SeededGenerator(seed: 42)
    return (0..<orders).map { order in
        var replica = Replica(localUser: localUser)
        var batch = order == 0 ? operations : order == 1 ? operations.reversed() : operations.shuffled(using: &rng)
        if order > 2 { batch += batch.prefix(3) }
        if order % 2 == 0 { _ = replica.apply(verified: batch) } else { replica.applyEach(batch) }
        return replica
    }
}

// MARK: - §13: causes first

@Suite("merge rules: §13 causes first")
struct CausesFirstTests {
    @Test("an operation waits for its causes and is applied when they arrive; a duplicate changes nothing")
    func waitsForCauses() {
        var a = Peer(0)
        let create = a.create(with: [bob])
        let hello = a.post("hello", in: create.conversation)
        var b = Peer(1)
        let first = b.receive([hello])
        #expect(first.pending == [hello.id])
        #expect(first.accepted.isEmpty)
        #expect(b.replica.pendingCount == 1)
        #expect(b.replica.conversationIDs.isEmpty)

        let second = b.receive([create])
        #expect(Set(second.accepted) == [create.id, hello.id])
        #expect(second.pending.isEmpty)
        #expect(b.replica.pendingCount == 0)
        #expect(b.replica.texts(in: create.conversation) == ["hello"])

        let before = ReplicaDigest(b.replica)
        let again = b.receive([hello, create, hello])
        #expect(again.duplicates.count == 3)
        #expect(again.accepted.isEmpty && again.rejected.isEmpty)
        #expect(ReplicaDigest(b.replica) == before)
    }
}

// MARK: - §13.2 Distinct conversations and merging

@Suite("merge rules: §13.2 distinct conversations and merging")
struct DistinctTests {
    @Test("distinct goes from true to false with any membership change, and never back")
    func distinctOnlyGoesFalse() throws {
        var a = Peer(0)
        let create = a.create(with: [bob])
        let id = create.conversation
        #expect(a.replica.conversation(id)?.isDistinct == true)
        let add = a.write(.addParticipants([carol]), in: id)
        #expect(a.replica.conversation(id)?.isDistinct == false)
        let remove = a.write(.removeParticipants([carol]), in: id)
        let snapshot = try #require(a.replica.conversation(id))
        // The participants are those of the creation again; the conversation stays non-distinct.
        #expect(snapshot.participants == [alice, bob].sorted())
        #expect(!snapshot.isDistinct)
        #expect(a.replica.distinctConversation(for: [alice, bob]) == nil)
        for replica in replicas(fedWith: [create, add, remove]) {
            #expect(replica.conversation(id)?.isDistinct == false)
        }

        let plain = a.create(with: [dave], distinct: false)
        #expect(a.replica.conversation(plain.conversation)?.isDistinct == false)
        #expect(a.replica.distinctConversation(for: [alice, dave]) == nil)
    }

    @Test(
        "concurrent distinct creations merge into the least by (creation timestamp, identifier); every member's identifier finds it",
        arguments: [false, true])
    func canonicalConversation(sameTimestamp: Bool) throws {
        var peers = [Peer(0), Peer(1), Peer(2)]
        let walls: [UInt64] = sameTimestamp ? [50_000, 50_000, 50_000] : [50_300, 50_100, 50_200]
        var creations: [SignedOperation] = []
        var posts: [SignedOperation] = []
        for index in peers.indices {
            peers[index].wall = walls[index]
            let create = peers[index].create(with: [alice, bob, carol].filter { $0 != peers[index].user })
            creations.append(create)
            posts.append(peers[index].post("from \(index)", in: create.conversation))
        }
        let ids = creations.map(\.conversation)
        #expect(Set(ids).count == 3)
        let expectedCanonical = sameTimestamp ? ids.min()! : ids[1]
        let everything = creations + posts

        for (index, replica) in replicas(fedWith: everything).enumerated() {
            #expect(replica.conversationIDs == [expectedCanonical], "order \(index)")
            for id in ids {
                #expect(replica.canonicalID(for: id) == expectedCanonical)
                #expect(replica.conversation(id)?.id == expectedCanonical)
                #expect(replica.messages(in: id).map(\.conversation) == Array(repeating: expectedCanonical, count: 3))
            }
            let snapshot = try #require(replica.conversation(expectedCanonical))
            #expect(snapshot.mergedIDs == ids.filter { $0 != expectedCanonical }.sorted())
            #expect(snapshot.createdAt == creations[ids.firstIndex(of: expectedCanonical)!].operation.timestamp)
            #expect(snapshot.creator == creations[ids.firstIndex(of: expectedCanonical)!].operation.author)
            #expect(snapshot.isDistinct)
            #expect(snapshot.messageCount == 3)
            #expect(Set(replica.messages(in: expectedCanonical).map(\.postedTo)) == Set(ids))
            #expect(replica.distinctConversation(for: [alice, bob, carol]) == expectedCanonical)
        }
    }

    @Test("creating the distinct conversation again returns the existing one, and a creation that ignores it merges into it")
    func creatingAgain() {
        var a = Peer(0)
        let create = a.create(with: [bob])
        let id = create.conversation
        #expect(a.replica.distinctConversation(for: [alice, bob]) == id)
        #expect(a.replica.generation(forDistinct: [alice, bob]) == 1)
        #expect(a.replica.distinctConversation(for: [alice, bob, carol]) == nil)
        #expect(a.replica.distinctConversation(for: [alice]) == nil)

        var b = Peer(1)
        b.receive([create])
        #expect(b.replica.distinctConversation(for: [alice, bob]) == id)
        // A creation made anyway joins the same generation and merges into the earlier one.
        let late = b.create(with: [alice])
        #expect(b.replica.conversationIDs == [id])
        #expect(b.replica.conversation(late.conversation)?.id == id)
        #expect(b.replica.distinctConversation(for: [alice, bob]) == id)
    }

    @Test("after a group stops being distinct, a creation starts a new generation; creations that had not seen the change join the old group")
    func newGeneration() throws {
        var a = Peer(0)
        var b = Peer(1)
        let first = a.create(with: [bob])
        b.receive([first])
        let add = a.write(.addParticipants([carol]), in: first.conversation)
        #expect(a.replica.distinctConversation(for: [alice, bob]) == nil)
        #expect(a.replica.generation(forDistinct: [alice, bob]) == 2)
        let second = a.create(with: [bob])
        guard case .createConversation(_, _, let generation, _) = second.operation.body else { return }
        #expect(generation == 2)
        #expect(a.replica.conversationIDs.count == 2)
        #expect(a.replica.distinctConversation(for: [alice, bob]) == second.conversation)

        // Bob had not seen the add: his creation is in generation 1 and joins the first group.
        b.wall = 20_000
        #expect(b.replica.generation(forDistinct: [alice, bob]) == 1)
        let bobs = b.create(with: [alice])
        for replica in replicas(fedWith: [first, add, second, bobs]) {
            #expect(Set(replica.conversationIDs) == [first.conversation, second.conversation])
            #expect(replica.conversation(bobs.conversation)?.id == first.conversation)
            #expect(replica.conversation(first.conversation)?.isDistinct == false)
            #expect(replica.conversation(second.conversation)?.mergedIDs == [])
            #expect(replica.distinctConversation(for: [alice, bob]) == second.conversation)
            #expect(replica.generation(forDistinct: [alice, bob]) == 2)
        }
    }

    @Test("a merge group is distinct while all its members are: a change in a merged member makes the group non-distinct")
    func groupDistinctWhileAllMembersAre() throws {
        var a = Peer(0)
        var b = Peer(1)
        a.wall = 1_000
        b.wall = 2_000
        let x = a.create(with: [bob])
        let y = b.create(with: [alice])
        b.receive([x])
        #expect(b.replica.conversation(y.conversation)?.id == x.conversation)
        #expect(b.replica.conversation(x.conversation)?.isDistinct == true)
        // Bob adds Carol in his own conversation, which is merged into Alice's.
        let add = b.write(.addParticipants([carol]), in: y.conversation)
        for replica in replicas(fedWith: [x, y, add]) {
            let snapshot = try #require(replica.conversation(x.conversation))
            #expect(!snapshot.isDistinct)
            #expect(snapshot.mergedIDs == [y.conversation])
            #expect(snapshot.participants == [alice, bob, carol].sorted())
            #expect(replica.distinctConversation(for: [alice, bob]) == nil)
            #expect(replica.generation(forDistinct: [alice, bob]) == 2)
        }
    }

    @Test("distinctConversation and generation(forDistinct:) agree when generations were skipped, and the last one does not overflow")
    func skippedGenerations() throws {
        var a = Peer(0)
        let first = a.create(with: [bob])
        // Bob writes a creation in generation 5 (no honest node skips generations) and makes it non-distinct.
        var b = Peer(1)
        let skipped = forgeCreation(1, participants: [alice, bob], generation: 5, timestamp: HLCTimestamp(milliseconds: 20_000, counter: 0).rawValue)
        b.receive([skipped])
        let add = b.write(.addParticipants([carol]), in: skipped.conversation)
        a.receive([skipped, add])
        #expect(a.replica.conversation(first.conversation)?.isDistinct == true)
        // The newest group for the set is not distinct: a creation starts generation 6, so there is no distinct conversation to return.
        #expect(a.replica.generation(forDistinct: [alice, bob]) == 6)
        #expect(a.replica.distinctConversation(for: [alice, bob]) == nil)
        let next = a.create(with: [bob])
        #expect(a.replica.distinctConversation(for: [alice, bob]) == next.conversation)

        // The last generation, not distinct: creations join it rather than overflow.
        var c = Peer(2)
        let last = forgeCreation(2, participants: [carol, dave], generation: .max)
        c.receive([last])
        c.write(.removeParticipants([dave]), in: last.conversation)
        #expect(c.replica.generation(forDistinct: [carol, dave]) == .max)
        #expect(c.replica.distinctConversation(for: [carol, dave]) == nil)
    }
}

// MARK: - §13.3 Membership

@Suite("merge rules: §13.3 membership")
struct MembershipTests {
    /// Alice creates {alice, bob, carol}; Bob and Carol receive it.
    private func threeParticipants() -> (Peer, Peer, Peer, SignedOperation) {
        var a = Peer(0), b = Peer(1), c = Peer(2)
        let create = a.create(with: [bob, carol])
        b.receive([create])
        c.receive([create])
        return (a, b, c, create)
    }

    @Test("a removal wins over a concurrent add, whatever the order of arrival")
    func removeWins() {
        var (a, b, _, create) = threeParticipants()
        let id = create.conversation
        let remove = a.write(.removeParticipants([carol]), in: id)
        let add = b.write(.addParticipants([carol]), in: id)
        #expect(a.replica.isParticipant(carol, of: id) == false)
        #expect(b.replica.isParticipant(carol, of: id) == true)
        for replica in replicas(fedWith: [create, remove, add]) {
            #expect(replica.conversation(id)?.participants == [alice, bob].sorted())
            #expect(replica.isParticipant(carol, of: id) == false)
        }
    }

    @Test("an add made after seeing the removal brings the user back")
    func reAddAfterRemoval() {
        var (a, b, c, create) = threeParticipants()
        let id = create.conversation
        let remove = a.write(.removeParticipants([carol]), in: id)
        b.receive([remove])
        let add = b.write(.addParticipants([carol]), in: id)
        #expect(b.accepted)
        for replica in replicas(fedWith: [create, remove, add]) {
            #expect(replica.conversation(id)?.participants == [alice, bob, carol].sorted())
        }
        // Carol can write again once she has seen the add.
        c.receive([remove, add])
        c.post("back", in: id)
        #expect(c.accepted)
    }

    @Test("across a merge group, a user is a participant when every member that names them admits them")
    func membershipAcrossGroup() throws {
        var a = Peer(0), b = Peer(1)
        a.wall = 1_000
        b.wall = 2_000
        let x = a.create(with: [bob])
        let y = b.create(with: [alice])
        // Bob adds Carol and Dave in his conversation; Alice adds then removes Carol in hers.
        let bobAdds = b.write(.addParticipants([carol, dave]), in: y.conversation)
        let aliceAdds = a.write(.addParticipants([carol]), in: x.conversation)
        let aliceRemoves = a.write(.removeParticipants([carol]), in: x.conversation)
        for replica in replicas(fedWith: [x, y, bobAdds, aliceAdds, aliceRemoves]) {
            let snapshot = try #require(replica.conversation(y.conversation))
            #expect(snapshot.id == x.conversation)
            // Carol: named by both, refused by Alice's. Dave: named by Bob's only, which admits him.
            #expect(snapshot.participants == [alice, bob, dave].sorted())
        }
    }

    @Test("a message posted concurrently with its author's removal stays; one posted after seeing the removal is refused")
    func postConcurrentWithRemoval() throws {
        var (a, b, _, create) = threeParticipants()
        let id = create.conversation
        let remove = a.write(.removeParticipants([bob]), in: id)
        let concurrent = b.post("while being removed", in: id)
        #expect(b.accepted)
        a.receive([concurrent])
        #expect(a.accepted)
        #expect(a.replica.texts(in: id) == ["while being removed"])
        #expect(a.replica.isParticipant(bob, of: id) == false)

        b.receive([remove])
        let before = ReplicaDigest(a.replica)
        let late = b.post("after my removal", in: id)
        #expect(b.refusal == .notAParticipant)
        let report = a.receive([late])
        #expect(report.rejected.map(\.1.reason) == [.notAParticipant])
        var after = ReplicaDigest(a.replica)
        after.rejected.remove(late.id)
        #expect(after == before)
        for replica in replicas(fedWith: [create, remove, concurrent, late]) {
            #expect(replica.texts(in: id) == ["while being removed"])
            #expect(replica.rejectedOperations == [late.id])
        }
    }

    @Test("an operation by a user who was never a participant is refused")
    func strangerRefused() {
        let (_, _, _, create) = threeParticipants()
        var d = Peer(3)
        d.receive([create])
        d.post("let me in", in: create.conversation)
        #expect(d.refusal == .notAParticipant)
        d.write(.addParticipants([dave]), in: create.conversation)
        #expect(d.refusal == .notAParticipant)
        #expect(d.replica.conversation(create.conversation)?.participants == [alice, bob, carol].sorted())
    }

    @Test("any participant may add or remove anyone, themselves included")
    func anyoneMayChangeMembership() throws {
        var (a, b, _, create) = threeParticipants()
        let id = create.conversation
        b.write(.addParticipants([dave]), in: id)
        #expect(b.accepted)
        b.write(.removeParticipants([alice]), in: id)
        #expect(b.accepted)
        b.write(.removeParticipants([bob]), in: id)
        #expect(b.accepted)
        #expect(b.replica.conversation(id)?.participants == [carol, dave].sorted())
        b.post("gone", in: id)
        #expect(b.refusal == .notAParticipant)
        a.receive(b.wellFormed(in: id))
        a.post("still here?", in: id)
        #expect(a.refusal == .notAParticipant)
    }

    @Test("new participants have a status for every earlier message")
    func newParticipantsSeeHistory() throws {
        var a = Peer(0)
        let create = a.create(with: [bob])
        let early = a.post("before Carol", in: create.conversation)
        a.write(.addParticipants([carol]), in: create.conversation)
        let message = try #require(a.replica.messages(in: create.conversation).first)
        #expect(message.id == early.id)
        #expect(message.recipientStatus == [bob: .sent, carol: .sent])
    }
}

// MARK: - §13.4 Metadata

@Suite("merge rules: §13.4 metadata")
struct MetadataTests {
    @Test("last writer wins by timestamp, whatever the order of arrival; creation metadata is a write")
    func laterTimestampWins() throws {
        var a = Peer(0), b = Peer(1)
        let create = a.create(with: [bob], metadata: ["title": "first", "topic": "t"])
        b.receive([create])
        a.wall = 30_000
        b.wall = 40_000
        let early = a.write(.setMetadata(["title": "alice's"]), in: create.conversation)
        let late = b.write(.setMetadata(["title": "bob's"]), in: create.conversation)
        for replica in replicas(fedWith: [create, late, early]) {
            #expect(replica.conversation(create.conversation)?.metadata == ["title": "bob's", "topic": "t"])
        }
    }

    @Test("equal timestamps: the greater author key wins; same author and timestamp: the greater operation identifier")
    func ties() throws {
        var a = Peer(0), b = Peer(1)
        a.wall = 1_000
        b.wall = 2_000
        let x = a.create(with: [bob])
        let y = b.create(with: [alice])
        a.receive([y])
        b.receive([x])
        a.wall = 60_000
        b.wall = 60_000
        let fromAlice = a.write(.setMetadata(["title": "alice's"]), in: x.conversation)
        let fromBob = b.write(.setMetadata(["title": "bob's"]), in: x.conversation)
        #expect(fromAlice.operation.timestamp == fromBob.operation.timestamp)
        let keyWinner = alice > bob ? "alice's" : "bob's"
        for replica in replicas(fedWith: [x, y, fromAlice, fromBob]) {
            #expect(replica.conversation(x.conversation)?.metadata["title"] == keyWinner)
        }

        // Alice, from two devices with the same clock, writes in both merged conversations at once.
        var twin = a.author
        a.wall = 70_000
        let inX = a.write(.setMetadata(["topic": "in x"]), in: x.conversation)
        let inY = twin.write(.setMetadata(["topic": "in y"]), in: y.conversation, replica: a.replica, wallMilliseconds: 70_001)
        #expect(inX.operation.timestamp == inY.operation.timestamp)
        let idWinner = inX.id > inY.id ? "in x" : "in y"
        for replica in replicas(fedWith: [x, y, fromAlice, fromBob, inX, inY]) {
            #expect(replica.conversation(y.conversation)?.metadata["topic"] == idWinner)
        }
    }

    @Test("removing a key is a write: a later removal beats an earlier value, a later value beats an earlier removal")
    func removalIsAWrite() {
        var a = Peer(0), b = Peer(1)
        let create = a.create(with: [bob], metadata: ["title": "t", "topic": "x"])
        b.receive([create])
        a.wall = 30_000
        b.wall = 40_000
        let setTitle = a.write(.setMetadata(["title": "kept?"]), in: create.conversation)
        let removeTitle = b.write(.setMetadata(["title": nil]), in: create.conversation)
        a.wall = 50_000
        b.wall = 45_000
        let removeTopic = b.write(.setMetadata(["topic": nil]), in: create.conversation)
        let setTopic = a.write(.setMetadata(["topic": "back"]), in: create.conversation)
        for replica in replicas(fedWith: [create, setTitle, removeTitle, removeTopic, setTopic]) {
            #expect(replica.conversation(create.conversation)?.metadata == ["topic": "back"])
        }
    }
}

// MARK: - §13.5 Messages

@Suite("merge rules: §13.5 messages")
struct MessageOrderTests {
    @Test("messages are ordered by (timestamp, sender key, identifier) across a merge group; a position is an index")
    func order() throws {
        var a = Peer(0), b = Peer(1)
        a.wall = 1_000
        b.wall = 2_000
        let x = a.create(with: [bob])
        let y = b.create(with: [alice])
        a.receive([y])
        b.receive([x])
        var posts: [SignedOperation] = []
        a.wall = 10_000
        b.wall = 10_000
        posts.append(a.post("a1", in: x.conversation))  // 10001
        posts.append(b.post("b1", in: y.conversation))  // 10001
        b.wall = 9_000
        posts.append(b.post("b2", in: x.conversation))  // after b's clock: 10001.1
        var twin = a.author
        posts.append(a.post("a2", in: x.conversation))  // 10002
        posts.append(SignedOperation(wireBytesOf: twin.write(Fixtures.text("a2'"), in: y.conversation, replica: a.replica, wallMilliseconds: 10_002)))
        let expected = posts.sorted { p, q in
            let (s, t) = (p.operation, q.operation)
            if s.timestamp != t.timestamp { return s.timestamp < t.timestamp }
            if s.author != t.author { return s.author < t.author }
            return p.id < q.id
        }
        // The cases the order is about: equal timestamps from two senders, and from one sender.
        #expect(posts[0].operation.timestamp == posts[1].operation.timestamp)
        #expect(posts[3].operation.timestamp == posts[4].operation.timestamp)
        for replica in replicas(fedWith: [x, y] + posts) {
            let messages = replica.messages(in: y.conversation)
            #expect(messages.map(\.id) == expected.map(\.id))
            #expect(messages.map(\.position) == Array(0..<posts.count))
            for message in messages { #expect(replica.message(message.id) == message) }
        }
    }

    @Test("a deleted message is gone for everyone, and the positions close up")
    func deletion() throws {
        var a = Peer(0), b = Peer(1)
        let create = a.create(with: [bob])
        let m1 = a.post("one", in: create.conversation)
        let m2 = a.post("two", in: create.conversation)
        let m3 = a.post("three", in: create.conversation)
        let delete = a.write(.deleteMessage(m2.id), in: create.conversation)
        #expect(a.accepted)
        b.receive([create, m1, m2, m3])
        let receipt = b.write(.read([m2.id]), in: create.conversation)
        for replica in replicas(fedWith: [create, m1, m2, m3, delete, receipt]) {
            #expect(replica.texts(in: create.conversation) == ["one", "three"])
            #expect(replica.messages(in: create.conversation).map(\.position) == [0, 1])
            #expect(replica.conversation(create.conversation)?.messageCount == 2)
            #expect(replica.conversation(create.conversation)?.lastMessageAt == m3.operation.timestamp)
            #expect(replica.message(m2.id) == nil)
        }
    }
}

extension SignedOperation {
    /// The operation as a receiver decodes it.
    init(wireBytesOf op: SignedOperation) { self = try! SignedOperation(wireBytes: op.wireBytes) }
}

// MARK: - §13.6 Receipts

@Suite("merge rules: §13.6 receipts")
struct ReceiptTests {
    @Test("sent, then delivered, then read; read implies delivered; the highest holds whatever the order")
    func statusLadder() throws {
        var a = Peer(0), b = Peer(1), c = Peer(2)
        let create = a.create(with: [bob, carol])
        let m = a.post("hi", in: create.conversation)
        b.receive([create, m])
        c.receive([create, m])
        #expect(a.replica.messages(in: create.conversation).first?.recipientStatus == [bob: .sent, carol: .sent])
        let delivered = b.write(.delivered([m.id]), in: create.conversation)
        let bobRead = b.write(.read([m.id]), in: create.conversation)
        // Carol reads without a delivered receipt first.
        let carolRead = c.write(.read([m.id]), in: create.conversation)
        a.receive([delivered])
        #expect(a.replica.messages(in: create.conversation).first?.recipientStatus == [bob: .delivered, carol: .sent])
        for replica in replicas(fedWith: [create, m, bobRead, delivered, carolRead]) {
            #expect(replica.messages(in: create.conversation).first?.recipientStatus == [bob: .read, carol: .read])
        }
        // A delivered receipt after the read one does not lower the status.
        let lateDelivery = c.write(.delivered([m.id]), in: create.conversation)
        for replica in replicas(fedWith: [create, m, bobRead, delivered, carolRead, lateDelivery]) {
            #expect(replica.messages(in: create.conversation).first?.recipientStatus == [bob: .read, carol: .read])
        }
    }

    @Test("only current participants other than the sender have a status")
    func statusesOfCurrentParticipants() throws {
        var a = Peer(0)
        let create = a.create(with: [bob, carol])
        a.post("hi", in: create.conversation)
        a.write(.removeParticipants([carol]), in: create.conversation)
        a.write(.addParticipants([dave]), in: create.conversation)
        #expect(a.replica.messages(in: create.conversation).first?.recipientStatus == [bob: .sent, dave: .sent])
    }

    @Test("mark all read covers exactly the messages in its causal past, not concurrent or later ones")
    func markAllReadWatermark() throws {
        var a = Peer(0), b = Peer(1), c = Peer(2)
        let create = a.create(with: [bob, carol])
        let id = create.conversation
        c.receive([create])
        let m1 = a.post("m1", in: id)
        let m2 = a.post("m2", in: id)
        b.receive([create, m1, m2])
        let concurrent = c.post("m3 concurrent", in: id)
        let mark = b.write(.markAllRead, in: id)
        a.receive([mark])
        let later = a.post("m4 after the mark", in: id)
        let all = [create, m1, m2, concurrent, mark, later]
        for replica in replicas(fedWith: all, localUser: bob) {
            let statuses = Dictionary(uniqueKeysWithValues: replica.messages(in: id).map { ($0.id, $0.recipientStatus[bob]) })
            #expect(statuses == [m1.id: .read, m2.id: .read, concurrent.id: .sent, later.id: .sent])
            #expect(replica.conversation(id)?.unreadCount == 2)
        }
        // A second mark after receiving everything covers the rest.
        b.receive(all)
        b.write(.markAllRead, in: id)
        #expect(b.replica.conversation(id)?.unreadCount == 0)
        #expect(b.replica.messages(in: id).allSatisfy { $0.recipientStatus[bob] == .read })
    }

    @Test("the unread count is the local user's: messages not read by them, never their own")
    func unreadCount() throws {
        var a = Peer(0), b = Peer(1)
        let create = a.create(with: [bob])
        let m1 = a.post("one", in: create.conversation)
        let m2 = a.post("two", in: create.conversation)
        b.receive([create, m1, m2])
        b.post("mine", in: create.conversation)
        #expect(b.replica.conversation(create.conversation)?.unreadCount == 2)
        b.write(.read([m1.id]), in: create.conversation)
        #expect(b.replica.conversation(create.conversation)?.unreadCount == 1)
        #expect(a.replica.conversation(create.conversation)?.unreadCount == 0)
        var nobody = Replica(localUser: nil)
        _ = nobody.apply(verified: b.wellFormed(in: create.conversation))
        #expect(nobody.conversation(create.conversation)?.unreadCount == 0)
        #expect(nobody.conversation(create.conversation)?.messageCount == 3)
    }
}
