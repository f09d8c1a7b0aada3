import Foundation
import GRDB
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

/// Publication, the removal rule and retention (SPEC.md §13.7–§13.8).
@Suite("Store: what a node shares — publication, withholding, retention")
struct SharingTests {
    static let now: UInt64 = 1_800_000_000_000

    static func text(_ s: String) -> [MessagePart] { [MessagePart(mimeType: "text/plain", data: Array(s.utf8))] }

    /// A local store with the next commit's batch at hand.
    struct Node {
        let identity = NodeIdentity.generate()
        let store: Store
        let author: LocalAuthor

        init(now: UInt64 = SharingTests.now) throws {
            store = try Store(directory: nil, localUser: identity.publicKey)
            author = try LocalAuthor(store: store, identity: identity, wallClock: { now })
        }

        var user: UserID { identity.publicKey }

        /// Runs `body` and returns the one batch its commit published.
        func committing(_ body: () async throws -> Void) async throws -> CommittedChanges {
            var changes = store.changes().makeAsyncIterator()
            try await body()
            return try #require(await changes.next())
        }
    }

    @Test("a conversation stays local until its first message, which takes the creation and earlier changes along; received logs are published")
    func localUntilTheFirstMessage() async throws {
        let alice = try Node()
        let bob = NodeIdentity.generate().publicKey
        let carol = NodeIdentity.generate().publicKey
        var id: ConversationID!
        let created = try await alice.committing { id = try await alice.author.createConversation(with: [bob]).conversation }
        #expect(created.summaries.map(\.isPublished) == [false])
        #expect(created.storedOperations.isEmpty)
        let conversationID = try #require(id)
        let added = try await alice.committing { try await alice.author.write(.addParticipants([carol]), in: [conversationID]) }
        #expect(added.storedOperations.isEmpty)
        _ = try await alice.author.write(.setMetadata(["title": "plans"]), in: [conversationID])
        #expect(try alice.store.logSummary(of: conversationID)?.isPublished == false)

        let posted = try await alice.committing { _ = try await alice.author.post(Self.text("hello"), in: conversationID) }
        let held = try alice.store.operations(in: conversationID, beyond: VersionVector(), limit: 100)
        #expect(held.count == 4)
        #expect(posted.storedOperations.map(\.id) == held.map(\.id), "all of it, in causal order")
        #expect(posted.summaries.map(\.isPublished) == [true])
        // Later writes go as they come.
        let later = try await alice.committing { try await alice.author.write(.setMetadata(["title": "later"]), in: [conversationID]) }
        #expect(later.storedOperations.count == 1)
    }

    @Test("announce publishes a new conversation at once, and an existing local distinct one too")
    func announce() async throws {
        let alice = try Node()
        let bob = NodeIdentity.generate().publicKey
        let dave = NodeIdentity.generate().publicKey
        var id: ConversationID!
        let announced = try await alice.committing {
            id = try await alice.author.createConversation(with: [bob], announce: true).conversation
        }
        #expect(announced.summaries.map(\.isPublished) == [true])
        #expect(announced.storedOperations.map(\.operation.conversation) == [try #require(id)])

        let local = try await alice.author.createConversation(with: [dave]).conversation
        #expect(try alice.store.logSummary(of: local)?.isPublished == false)
        var again: (conversation: ConversationID, created: Bool)!
        let republished = try await alice.committing {
            again = try await alice.author.createConversation(with: [dave], announce: true)
        }
        #expect(again.conversation == local && !again.created)
        #expect(republished.storedOperations.count == 1)
        #expect(try alice.store.logSummary(of: local)?.isPublished == true)
    }

    @Test("a removed participant is not sent what was posted after the removal; re-added, it is again; a relay gets everything; across a merge group too")
    func withholding() async throws {
        let alice = try Node()
        let bob = NodeIdentity.generate().publicKey
        let carol = NodeIdentity.generate().publicKey
        let relay = NodeIdentity.generate().publicKey
        let id = try await alice.author.createConversation(with: [bob, carol], distinct: false).conversation
        let before = try await alice.author.post(Self.text("before"), in: id)
        let removal = try await alice.author.write(.removeParticipants([bob]), in: [id])[0]
        let after = try await alice.author.post(Self.text("after"), in: id)
        let metadata = try await alice.author.write(.setMetadata(["title": "without bob"]), in: [id])[0]
        let readd = try await alice.author.write(.addParticipants([bob]), in: [id])[0]
        let back = try await alice.author.post(Self.text("back"), in: id)
        let all = try alice.store.operations(in: id, beyond: VersionVector(), limit: 100)
        #expect(all.count == 7)

        #expect(try alice.store.withheld(all, from: bob) == [after.id, metadata.id])
        #expect(try alice.store.withheld(all, from: carol).isEmpty)
        #expect(try alice.store.withheld(all, from: relay).isEmpty)
        _ = (readd, back)

        // Without the removal, what follows it waits for it: withheld, since the missing past
        // may hold a removal; a relay still gets it.
        let partial = try Store(directory: nil, localUser: alice.user)
        _ = try await partial.apply(received: all.filter { $0.id != removal.id }, wallMilliseconds: Self.now)
        #expect(try partial.withheld([before, after], from: bob) == [after.id])
        #expect(try partial.withheld([after], from: relay).isEmpty)

        // The same answers on a replica built from the operation table (nothing in memory).
        let reopened = try Store(directory: nil, localUser: alice.user)
        _ = try await reopened.apply(received: all, wallMilliseconds: Self.now)
        #expect(try reopened.withheld(all, from: bob) == [after.id, metadata.id])

        // A merge group: alice's and carol's distinct conversations for {alice, bob, carol}
        // merge; bob removed in every log; what is posted after goes to nobody's bob.
        var carolAuthor = Author(identity: .generate())
        let group = try await alice.author.createConversation(with: [bob, carolAuthor.user]).conversation
        let theirs = carolAuthor.createConversation(with: [alice.user, bob], in: Replica(localUser: nil), wallMilliseconds: Self.now - 5)
        _ = try await alice.author.receive([theirs])
        let merged = try #require(try alice.store.conversation(group))
        #expect(merged.mergedIDs.count == 1)
        let logs = [merged.id] + merged.mergedIDs
        _ = try await alice.author.write(.removeParticipants([bob]), in: logs)
        let posted = try await alice.author.post(Self.text("no bob"), in: merged.id)
        #expect(try alice.store.withheld([posted], from: bob) == [posted.id])
        #expect(try alice.store.withheld([posted], from: carolAuthor.user).isEmpty)
        #expect(try alice.store.withheld([theirs], from: bob).isEmpty, "a creation is never withheld")
    }

    @Test("pruning deletes relayed logs past the cutoff and keeps tombstones; the local user's logs stay; a pruned log arriving again is held from scratch")
    func retention() async throws {
        let alice = try Node()
        var peer = Author(identity: .generate())
        let other = NodeIdentity.generate().publicKey
        // Relayed: a conversation between two other users, with a message.
        var world = Replica(localUser: nil)
        let relayed = peer.createConversation(with: [other], distinct: false, in: world, wallMilliseconds: Self.now - 10_000)
        _ = world.apply(verified: [relayed])
        let message = peer.write(.postMessage(parts: Self.text("hi"), options: .init()), in: relayed.operation.conversation, replica: world, wallMilliseconds: Self.now - 9_000)
        _ = world.apply(verified: [message])
        // Alice's own: created by the peer with her, quiet for as long.
        let hers = peer.createConversation(with: [alice.user], distinct: false, in: world, wallMilliseconds: Self.now - 10_000)
        _ = try await alice.author.receive([relayed, message, hers])
        let relayedID = relayed.operation.conversation
        let before = try #require(try alice.store.logSummary(of: relayedID))
        // Relayed, so not shown (SPEC.md §14.9): no rows, only the log.
        #expect(try alice.store.conversation(relayedID) == nil)
        #expect(try alice.store.message(message.id) == nil)
        #expect(before.operationCount == 2)

        #expect(try await alice.store.pruneRelayed(olderThan: Self.now - 20_000) == 0, "nothing that old")
        var changes = alice.store.changes().makeAsyncIterator()
        #expect(try await alice.store.pruneRelayed(olderThan: Self.now) == 1)
        let batch = try #require(await changes.next())
        #expect(batch.changes.isEmpty, "a relayed conversation was never shown, so no deletion either")
        #expect(batch.summaries.map(\.isPruned) == [true])

        #expect(try alice.store.conversation(relayedID) == nil)
        #expect(try alice.store.message(message.id) == nil)
        #expect(try alice.store.operations(in: relayedID, beyond: VersionVector(), limit: 10).isEmpty)
        var tombstone = try #require(try alice.store.logSummary(of: relayedID))
        #expect(tombstone.isPruned)
        tombstone.isPruned = false
        #expect(tombstone == before, "the summary stays as it was")
        #expect(try alice.store.conversation(hers.operation.conversation) != nil)
        #expect(try await alice.store.pruneRelayed(olderThan: Self.now) == 0, "a tombstone is not pruned again")

        // A later operation of the pruned log: the tombstone goes, the log starts again.
        let later = peer.write(.postMessage(parts: Self.text("again"), options: .init()), in: relayedID, replica: world, wallMilliseconds: Self.now)
        let applied = try await alice.author.receive([later])
        #expect(applied.newOperations == [later.id])
        #expect(applied.pendingCount == 1, "its causes were pruned")
        let fresh = try #require(try alice.store.logSummary(of: relayedID))
        #expect(!fresh.isPruned)
        #expect(fresh.operationCount == 1)
        #expect(fresh.digest == SetDigest([later.id]))
        // Fetched again, the log is whole.
        _ = try await alice.author.receive([relayed, message])
        #expect(try alice.store.logSummary(of: relayedID)?.operationCount == 3)
        #expect(try alice.store.operations(in: relayedID).count == 3)
        #expect(try alice.store.conversation(relayedID) == nil, "still relayed only")
        try LogSummaryTests.expectSummariesMatchScan(alice.store)
    }

    @Test("a relay shows none of what it relays; added later, its user sees the conversation whole, every earlier message with its parts")
    func relayShowsOnceAdded() async throws {
        let alice = try Node()
        var peer = Author(identity: .generate())
        let other = NodeIdentity.generate().publicKey
        var world = Replica(localUser: nil)
        let creation = peer.createConversation(with: [other], distinct: false, in: world, wallMilliseconds: Self.now - 10_000)
        _ = world.apply(verified: [creation])
        let id = creation.operation.conversation
        var posts: [SignedOperation] = []
        for index in 0..<3 {
            let post = peer.write(.postMessage(parts: Self.text("m\(index)"), options: .init()), in: id, replica: world, wallMilliseconds: Self.now - 9_000 + UInt64(index))
            _ = world.apply(verified: [post])
            posts.append(post)
        }
        let relayed = try await alice.committing { _ = try await alice.author.receive([creation] + posts) }
        #expect(relayed.changes.isEmpty, "nothing shown")
        #expect(try alice.store.conversation(id) == nil)
        #expect(try alice.store.count(ConversationQuery()) == 0)
        #expect(try alice.store.count(MessageQuery()) == 0)
        #expect(try alice.store.operations(in: id).count == 4, "but stored, to relay")

        // The peer adds alice: her node shows the conversation with everything in it.
        let add = peer.write(.addParticipants([alice.user]), in: id, replica: world, wallMilliseconds: Self.now)
        let joined = try await alice.committing { _ = try await alice.author.receive([add]) }
        #expect(joined.changes.conversations.map(\.kind) == [.create])
        #expect(Set(joined.changes.messages.filter { $0.kind == .create }.map(\.id)) == Set(posts.map(\.id)))
        let shown = try #require(try alice.store.conversation(id))
        #expect(Set(shown.participants) == [peer.user, other, alice.user])
        #expect(shown.messageCount == 3)
        let messages = try alice.store.messages(MessageQuery([.init(.conversation, .equal, .conversation(id))], sort: [.init(.position)]))
        #expect(messages.map(\.id) == posts.map(\.id))
        #expect(messages.map(\.parts) == (0..<3).map { Self.text("m\($0)") })
        #expect(messages.map(\.position) == [0, 1, 2])
    }
}
