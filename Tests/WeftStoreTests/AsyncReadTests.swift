import Foundation
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("Store: the async reads (fetch…) answer as the synchronous ones do")
struct AsyncReadTests {
    @Test("on a store of a random workload, seen by one of its users with a message of theirs waiting in the outbox")
    func sameAnswers() async throws {
        var workload = Workload(seed: 11)
        workload.run(steps: 150)
        workload.gossipAll()
        let directory = try TemporaryDirectory()
        let local = workload.authors[0]
        let store = try Store(directory: directory.url, localUser: local.user)
        _ = try await store.apply(received: workload.operations, wallMilliseconds: workload.now + 1_000)
        let later = workload.now + 2_000
        let author = try LocalAuthor(store: store, identity: local.identity, wallClock: { later })
        let ownConversation = try #require(try store.conversations(ConversationQuery()).first { $0.participants.contains(local.user) })
        let posted = try await author.post([MessagePart(mimeType: "text/plain", data: [1])], in: ownConversation.id)
        let conversations = try store.conversations(ConversationQuery())

        // Replication's reads.
        #expect(try await store.fetchLogSummaries() == store.logSummaries())
        let rule = RemovalRule(try store.membershipFacts())
        #expect(!rule.isEmpty, "the workload removed someone")
        let logs = try store.logSummaries().map(\.conversation)
        var withheldCount = 0
        for log in logs {
            let all = try store.operations(in: log, beyond: VersionVector(), limit: 1_000)
            #expect(try await store.fetchOperations(in: log, beyond: VersionVector(), limit: 1_000).map(\.id) == all.map(\.id))
            var heads = VersionVector()
            if let first = all.first { heads.set(first.operation.author, first.operation.sequence) }
            #expect(
                try await store.fetchOperations(in: log, beyond: heads, limit: 5).map(\.id)
                    == store.operations(in: log, beyond: heads, limit: 5).map(\.id))
            #expect(try await store.fetchOperations(in: log, beyond: heads, limit: 0).isEmpty)
            #expect(try await store.fetchOperations(ids: all.reversed().map(\.id)).map(\.id) == all.reversed().map(\.id))
            // Replication's judgement (the rule from the memberships the store reports, on the
            // causal pasts it reads: from its replica, and from one read of the operation
            // table) agrees with the store's replica.
            let reopened = try Store(directory: directory.url, localUser: local.user)
            let pasts = try await store.fetchCausalPasts(of: all)
            #expect(try await reopened.fetchCausalPasts(of: all) == pasts)
            for user in workload.users {
                let withheld = try store.withheld(all, from: user)
                withheldCount += withheld.count
                let sent = rule.restricted(to: user)?.filter(all, pasts: pasts) ?? all
                #expect(Set(all.map(\.id)).subtracting(sent.map(\.id)) == withheld)
            }
        }
        #expect(withheldCount > 0, "the workload removed someone, and withholds from them")
        #expect(try await store.fetchCausalPasts(of: []).isEmpty)

        // The client's reads.
        #expect(try await store.fetchConversations(ConversationQuery()) == conversations)
        #expect(try await store.fetchCount(ConversationQuery()) == store.count(ConversationQuery()))
        for conversation in conversations {
            #expect(try await store.fetchConversation(conversation.id) == conversation)
            for user in workload.users {
                let membership = try store.membership(of: user, in: conversation.id)
                let fetched = try await store.fetchMembership(of: user, in: conversation.id)
                #expect(fetched?.canonical == membership?.canonical && fetched?.isParticipant == membership?.isParticipant)
            }
        }
        let messages = try store.messages(MessageQuery())
        #expect(try await store.fetchMessages(MessageQuery()) == messages)
        let page = MessageQuery([.init(.conversation, .equal, .conversation(ownConversation.id))], sort: [.init(.position)], limit: 3, offset: 1)
        #expect(try await store.fetchMessages(page) == store.messages(page))
        #expect(try await store.fetchCount(MessageQuery()) == messages.count)
        for message in messages.prefix(20) { #expect(try await store.fetchMessage(message.id) == message) }
        #expect(try await store.fetchMessage(posted.id) == store.message(posted.id))

        #expect(try await store.fetchOutbox() == store.outbox())
        #expect(try await store.fetchOutbox().map(\.message) == [posted.id])
        let ids = messages.map(\.id) + [posted.id]
        #expect(try await store.fetchWaiting(among: ids) == [posted.id])
    }
}
