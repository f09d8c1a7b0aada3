import Testing
import WeftCrypto
@testable import WeftDiscovery

@Suite("Which discovered nodes a node dials (SPEC.md §16.3)")
struct DiscoveredPeersTests {
    static let me = NodeIdentity.generate().publicKey
    static let mesh = MeshKey.generate().tag

    static func node(_ label: String, user: PublicIdentity = NodeIdentity.generate().publicKey, tag: [UInt8] = mesh,
                     port: UInt16 = 7400, addresses: [[UInt8]] = [[10, 0, 0, 2]]) -> DiscoveredNode {
        DiscoveredNode(
            instance: try! AdvertisedService.serviceType.prepending(Array(label.utf8)), host: try! DNSName("weft-1.local"), port: port,
            addresses: addresses, record: WeftServiceRecord(user: user, meshTag: tag))
    }

    @Test("a node of this mesh is dialed once, redialed where it moves, forgotten when lost")
    func sameMesh() {
        var peers = DiscoveredPeers(localUser: Self.me, meshTag: Self.mesh)
        let bob = Self.node("bob (0001)")
        #expect(peers.apply(.found(bob)) == [.dial(address: "10.0.0.2:7400", user: bob.record.user)])
        #expect(peers.apply(.found(bob)).isEmpty, "found again: already dialing")
        var moved = bob
        moved.port = 7500
        #expect(peers.apply(.found(moved)) == [.forget(address: "10.0.0.2:7400"), .dial(address: "10.0.0.2:7500", user: bob.record.user)])
        #expect(peers.apply(.lost(instance: bob.instance)) == [.forget(address: "10.0.0.2:7500")])
        #expect(peers.dialing.isEmpty)
    }

    @Test("another mesh's node and the node itself are never dialed; IPv6 alone is bracketed")
    func othersAndSelf() {
        var peers = DiscoveredPeers(localUser: Self.me, meshTag: Self.mesh)
        let stranger = Self.node("eve (0002)", tag: MeshKey.generate().tag)
        #expect(peers.apply(.found(stranger)).isEmpty)
        #expect(peers.otherMeshes == [stranger.instance])
        #expect(peers.apply(.found(Self.node("me (0003)", user: Self.me))).isEmpty)
        let v6 = Self.node("carol (0004)", addresses: [[0xfd, 0] + [UInt8](repeating: 0, count: 13) + [3]])
        #expect(peers.apply(.found(v6)) == [.dial(address: "[fd00:0:0:0:0:0:0:3]:7400", user: v6.record.user)])
    }
}
