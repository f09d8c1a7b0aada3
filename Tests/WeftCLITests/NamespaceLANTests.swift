import Foundation
import Testing

/// The namespace LAN that LAN discovery's tests run on (issue 8): nodes in namespaces of their
/// own reach each other across its bridge, the CLI drives them through their homes, and the
/// namespaces are gone afterwards.
@Suite(
    "A LAN of network namespaces joined by a bridge", .serialized, .timeLimit(.minutes(2)),
    .enabled(if: NamespaceLAN.unavailable == nil, "\(NamespaceLAN.unavailable ?? "")"))
struct NamespaceLANTests {
    @Test("two weft nodes in two namespaces connect across the bridge; the namespaces are removed after")
    func twoNodes() async throws {
        let lan = try NamespaceLAN(nodes: 2)
        defer { lan.remove() }
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start(listen: "\(lan.address(1)):7400", namespace: lan.namespace(1))
        try await bob.start(["--peer", "\(lan.address(1)):7400"], listen: "\(lan.address(2)):7400", namespace: lan.namespace(2))
        try await eventually("alice lists bob, dialed from the other namespace") {
            let peers = try await alice.json("peers") as? [[String: Any]] ?? []
            return peers.first?["displayName"] as? String == "bob"
        }
        let peers = try #require(try await alice.json("peers") as? [[String: Any]])
        #expect((peers.first?["address"] as? String)?.hasPrefix(lan.address(2) + ":") == true)
        #expect(try await bob.stop() == 0)
        #expect(try await alice.stop() == 0)

        let names = lan.namespaces
        lan.remove()
        let left = try NamespaceLAN.run(["netns", "list"])
        for name in names { #expect(!left.contains(name), "namespace \(name) is still there") }
    }
}
