import Foundation
import Logging
import NIOCore
import Synchronization
import Testing
import Weft
import WeftCrypto
import WeftModel
import WeftNode
import WeftStore

/// The sync core's one driver under load from every side at once: many tasks post messages,
/// the sender's writability flips constantly (tiny watermarks and queue), and the link is cut
/// and healed over and over (peer ends, reconnects, catch-up from the store). Every message
/// must reach the other node once, and every one must come back acknowledged (sent), however
/// the events interleave.
@Suite("the sync core's driver under concurrent events", .timeLimit(.minutes(5)))
struct DriverStressTests {
    typealias Harness = InProcessNodeTests

    static func makeNode(
        _ name: String, meshKey: MeshKey, peers: [PeerAddress], replication: ReplicationConfiguration,
        events: InProcessNodeTests.EventLog? = nil
    ) throws -> InProcessNode {
        try Harness.makeNode(
            name, meshKey: meshKey, peers: peers, events: events, replication: replication,
            redialDelays: [.milliseconds(20), .milliseconds(50)])
    }

    @Test("writability flips, posts from 8 tasks and 12 link cuts at once: every message arrives once and is acknowledged")
    func concurrentEvents() async throws {
        var replication = ReplicationConfiguration()
        // A few messages fill these: the core is told unwritable and writable again all the
        // time, and past its queue bound the peer falls behind and is sent from the store.
        replication.highWatermark = 8 << 10
        replication.lowWatermark = 2 << 10
        replication.sync.maxQueuedBytesPerPeer = 16 << 10
        replication.sync.antiEntropyIntervalMilliseconds = 2_000
        replication.maxQueuedEvents = 4
        let meshKey = MeshKey.generate()
        try await withThrowingTaskGroup { group in
            let bobEvents = InProcessNodeTests.EventLog()
            let bob = try Self.makeNode("bob", meshKey: meshKey, peers: [], replication: replication, events: bobEvents)
            group.addTask { try await bob.run() }
            try await Harness.eventually("bob listening") { bobEvents.listeningAddress != nil }
            let address = try #require(bobEvents.listeningAddress)
            let alice = try Self.makeNode(
                "alice", meshKey: meshKey, peers: [PeerAddress(host: address.ipAddress!, port: address.port!)], replication: replication)
            group.addTask { try await alice.run() }
            let bobUser = bob.client.localUser
            try await Harness.eventually("alice connected to bob") { alice.node.isConnected(bobUser) }
            let conversation = try await alice.client.createConversation(with: [bobUser])

            let text = String(repeating: "a message that takes some room on the wire ", count: 40)
            let sent = try await withThrowingTaskGroup(of: [OperationID].self) { posters in
                for poster in 0..<8 {
                    posters.addTask {
                        var ids: [OperationID] = []
                        for index in 0..<40 {
                            let message = try await alice.client.send(
                                [MessagePart(mimeType: "text/plain", data: Array("\(poster).\(index) \(text)".utf8))], in: conversation.id)
                            ids.append(message.id)
                        }
                        return ids
                    }
                }
                posters.addTask {
                    for _ in 0..<12 {
                        alice.node.cut(bobUser)
                        try await Harness.eventually("the link cut") { !alice.node.isConnected(bobUser) }
                        alice.node.heal(bobUser)
                        try await Harness.eventually("the link healed") { alice.node.isConnected(bobUser) }
                    }
                    return []
                }
                var all: [OperationID] = []
                for try await ids in posters { all += ids }
                return all
            }
            #expect(sent.count == 320)

            let query = MessageQuery([MessagePredicate(.conversation, .equal, .conversation(conversation.id))])
            try await Harness.eventually("bob holds every message", within: 120) { try await bob.client.count(query) == 320 }
            let received = try await bob.client.messages(query)
            #expect(received.count == 320)
            #expect(Set(received.map(\.id)) == Set(sent), "every message once, none other")
            try await Harness.eventually("alice sees every message sent", within: 120) {
                try await alice.client.messages(query).filter(\.isSent).count == 320
            }
            group.cancelAll()
        }
    }
}
