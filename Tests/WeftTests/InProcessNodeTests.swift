import Foundation
import Synchronization
import Testing
import Weft
import WeftCrypto
import WeftModel
import WeftNode
import WeftStore
import Logging
import NIOCore

/// `InProcessNode`: the mesh node and the client composed over one store, on real loopback
/// sockets.
@Suite("InProcessNode", .timeLimit(.minutes(3)))
struct InProcessNodeTests {
    /// What a node reported, in order.
    final class EventLog: Sendable {
        let events = Mutex<[NodeEvent]>([])
        var listeningAddress: SocketAddress? {
            events.withLock { $0.compactMap { if case .listening(let address) = $0 { address } else { nil } }.first }
        }
    }

    static func makeNode(
        _ name: String, meshKey: MeshKey, peers: [PeerAddress] = [], events: EventLog? = nil,
        replication: ReplicationConfiguration = ReplicationConfiguration(),
        redialDelays: [TimeAmount] = [.milliseconds(50), .milliseconds(200)]
    ) throws -> InProcessNode {
        let identity = NodeIdentity.generate()
        var logger = Logger(label: "test.\(name)")
        logger.logLevel = .critical
        let configuration = MeshNode.Configuration(
            identity: identity, meshKey: meshKey, displayName: name, peers: peers,
            tickInterval: .milliseconds(50), redialDelays: redialDelays)
        return try InProcessNode(
            configuration: configuration, store: try Store(directory: nil, localUser: identity.publicKey), replication: replication,
            logger: logger
        ) { event in events?.events.withLock { $0.append(event) } }
    }

    /// Polls `condition` until it holds or 60 s pass (a deadline against hangs: CPU-bound
    /// suites running alongside can hold both cooperative threads for seconds).
    static func eventually(_ what: String, within seconds: Int = 60, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while try await !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting for \(what)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test("two in-process nodes authenticate; what the node's store takes in reaches the client, and its node acknowledges delivery")
    func composed() async throws {
        let meshKey = MeshKey.generate()
        let aliceEvents = EventLog()
        let alice = try Self.makeNode("alice", meshKey: meshKey, events: aliceEvents)
        #expect(alice.client.store === alice.node.store, "one store, shared")

        try await withThrowingTaskGroup { group in
            group.addTask { try await alice.run() }
            try await Self.eventually("alice listening") { aliceEvents.listeningAddress != nil }
            let address = try #require(aliceEvents.listeningAddress)
            let bob = try Self.makeNode(
                "bob", meshKey: meshKey, peers: [PeerAddress(host: address.ipAddress!, port: address.port!)])
            group.addTask { try await bob.run() }
            try await Self.eventually("both authenticated") {
                alice.node.connectedPeers == [bob.node.identity] && bob.node.connectedPeers == [alice.node.identity]
            }

            // Bob writes through his client; alice's node takes the operations in below her
            // client (the way replication will), and her client hears of it.
            let changes = alice.client.changes()
            let chat = try await bob.client.createConversation(with: [alice.client.localUser])
            let sent = try await bob.client.send([.text("hi alice")], in: chat.id)
            let applied = try await alice.client.localAuthor.receive(bob.store.operations(in: chat.id))
            #expect(applied.refused.isEmpty)
            #expect(applied.report.accepted.contains(sent.id))
            var heard = false
            for await batch in changes {
                if batch.contains(where: { if case .message(let message) = $0.object { message.id == sent.id } else { false } }) {
                    heard = true
                    break
                }
            }
            #expect(heard)
            // The delivered receipt was written by alice's side in the same commit.
            let receipts = try alice.store.operations(in: chat.id).filter { $0.operation.author == alice.client.localUser }
            #expect(receipts.count == 1)
            #expect(try await alice.client.message(sent.id)?.sender == bob.client.localUser)

            group.cancelAll()
            try await group.waitForAll()
        }
    }

    @Test("a store of another user is refused with a clear error")
    func wrongStore() throws {
        let identity = NodeIdentity.generate()
        let other = try Store(directory: nil, localUser: NodeIdentity.generate().publicKey)
        let configuration = MeshNode.Configuration(identity: identity, meshKey: .generate(), displayName: "x")
        #expect(throws: WeftError.self) { try InProcessNode(configuration: configuration, store: other) }
    }
}
