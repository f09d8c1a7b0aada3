import Foundation
import Testing
import WeftCrypto
import WeftModel
@_spi(Benchmarks) @testable import WeftStore

@Suite("Store: the synthetic bulk path the benchmarks use")
struct SyntheticStoreTests {
    @Test("the rows the bulk path writes are exactly what the replica rebuilt from its operation log materializes; writes after it go through the replica")
    func syntheticEqualsReplica() async throws {
        let directory = try TemporaryDirectory()
        let local = NodeIdentity.generate()
        let peers = [NodeIdentity.generate(), NodeIdentity.generate(), NodeIdentity.generate()]
        do {
            let store = try Store(directory: directory.url, localUser: local.publicKey)
            try await store.fillSynthetic(conversations: 20, messagesPerConversation: 15, local: local, peers: peers)
        }
        let store = try Store(directory: directory.url, localUser: local.publicKey)
        #expect(try store.count(ConversationQuery()) == 20)
        #expect(try store.count(MessageQuery()) == 300)
        let replica = try store.replica
        #expect(replica.conversationIDs.count == 20)
        try expectStore(store, matches: replica)
        try LogSummaryTests.expectSummariesMatchScan(store)
        #expect(try store.logSummaries().allSatisfy(\.isPublished), "a peer created each")

        var author = Author(identity: local)
        let conversation = replica.conversationIDs[3]
        let post = author.write(
            .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [1, 2])], options: .init()), in: conversation,
            replica: replica, wallMilliseconds: 1_800_000_000_000)
        _ = try await store.commitLocal([post])
        #expect(try store.conversation(conversation)?.messageCount == 16)
        try expectStore(store, matches: try store.replica)
        try LogSummaryTests.expectSummariesMatchScan(store)
    }
}
