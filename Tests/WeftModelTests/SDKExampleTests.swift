import Testing
import WeftCrypto
@testable import WeftModel

/// The reference SDK's own examples, as Weft must reproduce them.
@Suite("the SDK's examples")
struct SDKExampleTests {
    @Test("A {1,2} and B {1,2,3} are distinct; adding 3 to A makes A non-distinct and leaves B distinct")
    func addingToDistinct() throws {
        var one = Author(identity: .generate())
        let two = NodeIdentity.generate().publicKey
        let three = NodeIdentity.generate().publicKey
        var replica = Replica(localUser: one.user)
        var now: UInt64 = 1_000

        let a = one.createConversation(with: [two], in: replica, wallMilliseconds: now)
        #expect(replica.apply(verified: [a]).accepted == [a.id])
        now += 1
        let b = one.createConversation(with: [two, three], in: replica, wallMilliseconds: now)
        #expect(replica.apply(verified: [b]).accepted == [b.id])
        let idA = a.operation.conversation, idB = b.operation.conversation
        #expect(replica.conversation(idA)?.isDistinct == true)
        #expect(replica.conversation(idB)?.isDistinct == true)

        now += 1
        let add = one.write(.addParticipants([three]), in: idA, replica: replica, wallMilliseconds: now)
        #expect(replica.apply(verified: [add]).accepted == [add.id])
        let conversationA = try #require(replica.conversation(idA))
        #expect(!conversationA.isDistinct)
        #expect(Set(conversationA.participants) == [one.user, two, three])
        let conversationB = try #require(replica.conversation(idB))
        #expect(conversationB.isDistinct)
        #expect(Set(conversationB.participants) == [one.user, two, three])
        #expect(conversationA.id != conversationB.id)
    }

    @Test("two users creating the distinct conversation while apart end up with one holding both users' messages")
    func concurrentDistinctCreation() throws {
        var alice = Author(identity: .generate())
        var bob = Author(identity: .generate())
        var aliceReplica = Replica(localUser: alice.user)
        var bobReplica = Replica(localUser: bob.user)

        let fromAlice = alice.createConversation(with: [bob.user], in: aliceReplica, wallMilliseconds: 5_000)
        _ = aliceReplica.apply(verified: [fromAlice])
        let helloBob = alice.write(
            .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array("hi bob".utf8))], options: .init()),
            in: fromAlice.operation.conversation, replica: aliceReplica, wallMilliseconds: 5_001)
        _ = aliceReplica.apply(verified: [helloBob])

        let fromBob = bob.createConversation(with: [alice.user], in: bobReplica, wallMilliseconds: 5_000)
        _ = bobReplica.apply(verified: [fromBob])
        let helloAlice = bob.write(
            .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array("hi alice".utf8))], options: .init()),
            in: fromBob.operation.conversation, replica: bobReplica, wallMilliseconds: 5_002)
        _ = bobReplica.apply(verified: [helloAlice])
        #expect(fromAlice.operation.conversation != fromBob.operation.conversation)

        // They meet and exchange everything.
        _ = aliceReplica.apply(verified: [fromBob, helloAlice])
        _ = bobReplica.apply(verified: [fromAlice, helloBob])
        for replica in [aliceReplica, bobReplica] {
            #expect(replica.conversationIDs.count == 1)
            let conversation = try #require(replica.conversation(fromAlice.operation.conversation))
            #expect(replica.conversation(fromBob.operation.conversation)?.id == conversation.id)
            #expect(conversation.isDistinct)
            #expect(conversation.messageCount == 2)
            #expect(replica.messages(in: conversation.id).map { String(decoding: $0.parts[0].data, as: UTF8.self) }
                == ["hi bob", "hi alice"])
        }
        #expect(aliceReplica.conversation(fromAlice.operation.conversation) == bobReplica.conversation(fromAlice.operation.conversation).map {
            var s = $0
            s.unreadCount = aliceReplica.conversation(fromAlice.operation.conversation)!.unreadCount
            return s
        })
        // Creating the distinct conversation again returns the merged one.
        #expect(aliceReplica.distinctConversation(for: [alice.user, bob.user]) == aliceReplica.conversationIDs.first)
    }
}

@Suite("change sets")
struct ChangeSetTests {
    @Test("a merge reports the merged conversation deleted, the canonical updated, and messages moved")
    func mergeChanges() throws {
        var alice = Author(identity: .generate())
        var bob = Author(identity: .generate())
        var replica = Replica(localUser: alice.user)
        let other = Replica(localUser: bob.user)
        let first = alice.createConversation(with: [bob.user], in: replica, wallMilliseconds: 1_000)
        let (_, created) = replica.applyReportingChanges(verified: [first])
        #expect(created.conversations.map(\.kind) == [.create])

        let late = bob.createConversation(with: [alice.user], in: other, wallMilliseconds: 2_000)
        var otherReplica = other
        _ = otherReplica.apply(verified: [late])
        let post = bob.write(
            .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [1])], options: .init()),
            in: late.operation.conversation, replica: otherReplica, wallMilliseconds: 2_001)
        let (report, changes) = replica.applyReportingChanges(verified: [late, post])
        #expect(report.accepted.count == 2)
        let canonical = first.operation.conversation
        // The later creation joins the group at once, so its own creation is never visible.
        #expect(changes.conversations.contains { $0.id == canonical && $0.kind == .update && $0.property == .mergedIDs
            && $0.newValue == .conversations([late.operation.conversation]) })
        #expect(changes.conversations.contains { $0.id == canonical && $0.property == .unreadCount && $0.newValue == .int(1) })
        #expect(changes.messages.map(\.kind) == [.create])
        #expect(changes.messages.first?.snapshot?.conversation == canonical)
    }
}
