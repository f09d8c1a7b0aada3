import Foundation
import Testing
import Weft
import WeftCrypto
import WeftModel
@testable import WeftNode
import WeftWire

@Suite("LocalNode: a whole node on a home, in-process", .timeLimit(.minutes(3)))
struct LocalNodeTests {
    /// Homes for alice and bob in one mesh, under a directory the caller removes.
    static func twoHomes() throws -> (root: URL, alice: URL, bob: URL, bobUser: UserID) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("weft-localnode-\(UUID().uuidString.prefix(8))")
        let meshKey = MeshKey.generate()
        let aliceHome = root.appendingPathComponent("alice")
        let bobHome = root.appendingPathComponent("bob")
        _ = try NodeHome(directory: aliceHome).create(displayName: "alice", meshKey: meshKey, protection: .none)
        let bobUser = try NodeHome(directory: bobHome).create(displayName: "bob", meshKey: meshKey, protection: .none).publicKey
        return (root, aliceHome, bobHome, bobUser)
    }

    @Test("two homes, one call each: a message goes from one client to the other and comes back delivered")
    func twoNodes() async throws {
        let (root, aliceHome, bobHome, bobUser) = try Self.twoHomes()
        defer { try? FileManager.default.removeItem(at: root) }

        let alice = try await LocalNode.start(home: aliceHome)
        let bob = try await LocalNode.start(home: bobHome, options: Self.dialing(alice.address))
        // A second node on the same home is refused with one sentence.
        await #expect(throws: (any Error).self) { _ = try await LocalNode.start(home: aliceHome) }

        let conversation = try await alice.client.createConversation(with: [bobUser])
        let sent = try await alice.client.send([MessagePart(mimeType: "text/plain", data: Array("hi bob".utf8))], in: conversation.id)
        try await InProcessNodeTests.eventually("bob has the message", within: 20) { try await bob.client.message(sent.id) != nil }
        try await InProcessNodeTests.eventually("alice sees delivered", within: 20) {
            try await alice.client.message(sent.id)?.status(for: bobUser) == .delivered
        }
        await bob.stop()
        await alice.stop()
        #expect(!FileManager.default.fileExists(atPath: aliceHome.appendingPathComponent("control.sock").path))
    }

    @Test("a stale end of a peer's connection, reported after its newer connection, leaves the newer one replicating")
    func staleEnd() async throws {
        let (root, aliceHome, bobHome, bobUser) = try Self.twoHomes()
        defer { try? FileManager.default.removeItem(at: root) }
        let alice = try await LocalNode.start(home: aliceHome)
        let bob = try await LocalNode.start(home: bobHome, options: Self.dialing(alice.address))
        try await InProcessNodeTests.eventually("alice to see bob", within: 20) { alice.daemon.node.isConnected(bobUser) }
        let bobInfo = try #require(alice.daemon.node.peers.first { $0.info.identity == bobUser }?.info)

        // The end of an earlier connection with bob (not the one bob is on now), handed over
        // only now (the order two connections' events may take): bob's current connection
        // must keep replicating.
        await alice.daemon.node.report(
            .connectionEnded(peer: bobInfo, address: nil, ConnectionEnd(.connectionLost, "an earlier connection"), connection: nil))
        let conversation = try await alice.client.createConversation(with: [bobUser])
        let sent = try await alice.client.send([MessagePart(mimeType: "text/plain", data: Array("still there".utf8))], in: conversation.id)
        try await InProcessNodeTests.eventually("bob has the message", within: 20) { try await bob.client.message(sent.id) != nil }
        try await InProcessNodeTests.eventually("alice sees delivered", within: 20) {
            try await alice.client.message(sent.id)?.status(for: bobUser) == .delivered
        }
        await bob.stop()
        await alice.stop()
    }

    @Test("discovery asked of an in-process node that cannot run it: one sentence, before anything listens or multicasts")
    func discoveryRefused() async throws {
        let (root, aliceHome, _, _) = try Self.twoHomes()
        defer { try? FileManager.default.removeItem(at: root) }
        // (Refusals only: a node with discovery on would multicast on this machine's own
        // interfaces; LAN discovery itself is tested in network namespaces, LANDiscoveryTests.)
        for (listen, interfaces, words) in [
            ("127.0.0.1:0", [], "127.0.0.1 is loopback"), ("0.0.0.0:0", ["nosuch0"], "There is no interface nosuch0"),
        ] {
            await #expect {
                var options = LocalNode.Options()
                options.listen = try #require(PeerAddress(listen))
                options.discoveryInterfaces = interfaces
                _ = try await LocalNode.start(home: aliceHome, options: options)
            } throws: { error in "\(error)".contains(words) }
        }
        // The home is free again: the refused start released its lock.
        let alice = try await LocalNode.start(home: aliceHome)
        await alice.stop()
    }

    static func dialing(_ peer: PeerAddress) -> LocalNode.Options {
        var options = LocalNode.Options()
        options.peers = [peer]
        return options
    }
}
