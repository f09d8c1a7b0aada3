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

/// Replication between in-process nodes over real loopback TCP: the Replicator driving the
/// sync core with real stores.
@Suite("replication over loopback", .timeLimit(.minutes(3)))
struct ReplicationTests {
    typealias Harness = InProcessNodeTests

    /// Starts `names.count` nodes in a line, each dialing the one before it.
    static func line(_ names: [String], in group: inout ThrowingTaskGroup<Void, any Error>) async throws -> [InProcessNode] {
        let meshKey = MeshKey.generate()
        var nodes: [InProcessNode] = []
        var previous: SocketAddress?
        for name in names {
            let events = InProcessNodeTests.EventLog()
            let peers = previous.map { [PeerAddress(host: $0.ipAddress!, port: $0.port!)] } ?? []
            let node = try Harness.makeNode(name, meshKey: meshKey, peers: peers, events: events)
            group.addTask { try await node.run() }
            try await Harness.eventually("\(name) listening") { events.listeningAddress != nil }
            previous = events.listeningAddress
            nodes.append(node)
        }
        return nodes
    }

    @Test("a message crosses a line A-B-C; delivered and read come back to A; A sees sent once B stored it")
    func lineOfThree() async throws {
        try await withThrowingTaskGroup { group in
            let nodes = try await Self.line(["alice", "bob", "carol"], in: &group)
            let (alice, bob, carol) = (nodes[0], nodes[1], nodes[2])
            try await Harness.eventually("the line is connected") {
                bob.node.connectedPeers.count == 2 && alice.node.connectedPeers.count == 1 && carol.node.connectedPeers.count == 1
            }
            let conversation = try await alice.client.createConversation(with: [carol.client.localUser])
            let message = try await alice.client.send([MessagePart(mimeType: "text/plain", data: Array("hello carol".utf8))], in: conversation.id)

            try await Harness.eventually("carol has the message") { try await carol.client.message(message.id) != nil }
            let received = try #require(try await carol.client.message(message.id))
            #expect(received.parts.first?.data == Array("hello carol".utf8))
            // Bob relays: he stores the conversation but is no participant.
            try await Harness.eventually("bob relays it") { try bob.store.operations(in: conversation.id).count >= 2 }

            try await Harness.eventually("alice sees sent and delivered") {
                guard let mine = try await alice.client.message(message.id) else { return false }
                return mine.isSent && mine.status(for: carol.client.localUser) == .delivered
            }
            try await carol.client.markAsRead(message.id)
            try await Harness.eventually("alice sees read") {
                try await alice.client.message(message.id)?.status(for: carol.client.localUser) == .read
            }
            group.cancelAll()
        }
    }

    @Test("a conversation stays local until its first message; then it travels with what was done in it before")
    func publication() async throws {
        try await withThrowingTaskGroup { group in
            let nodes = try await Self.line(["alice", "bob"], in: &group)
            let (alice, bob) = (nodes[0], nodes[1])
            try await Harness.eventually("connected") { alice.node.connectedPeers.count == 1 }
            let conversation = try await alice.client.createConversation(
                with: [bob.client.localUser], options: ConversationOptions(metadata: ["title": "plans"]))
            try await alice.client.setMetadata(["title": "better plans"], in: conversation.id)
            // An announced conversation travels at once; use it as the marker that replication ran.
            let announced = try await alice.client.createConversation(
                with: [bob.client.localUser], options: ConversationOptions(distinct: false, announce: true))
            try await Harness.eventually("the announced conversation arrives") { try await bob.client.conversation(announced.id) != nil }
            #expect(try await bob.client.conversation(conversation.id) == nil, "unannounced and without a message: still local")

            let message = try await alice.client.send([MessagePart(mimeType: "text/plain", data: Array("hi".utf8))], in: conversation.id)
            try await Harness.eventually("the conversation arrives with its message") { try await bob.client.message(message.id) != nil }
            #expect(try await bob.client.conversation(conversation.id)?.metadata["title"] == "better plans")
            group.cancelAll()
        }
    }
}
