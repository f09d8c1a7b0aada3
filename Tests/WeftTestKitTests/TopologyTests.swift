import Testing
import WeftTestKit

@Suite("LocalMesh topologies")
struct TopologyTests {
    typealias Link = LocalMesh.Link

    @Test("full, line and ring link the expected pairs")
    func fixed() {
        #expect(LocalMesh.Topology.full.links(count: 4).count == 6)
        #expect(LocalMesh.Topology.line.links(count: 4) == [Link(0, 1), Link(1, 2), Link(2, 3)])
        #expect(LocalMesh.Topology.ring.links(count: 4) == [Link(0, 1), Link(1, 2), Link(2, 3), Link(3, 0)])
        #expect(LocalMesh.Topology.line.links(count: 1).isEmpty)
    }

    @Test("a random topology is connected, bounded by its degree, and the same for the same seed", arguments: [1, 7, 42] as [UInt64])
    func random(seed: UInt64) {
        let links = LocalMesh.Topology.random(degree: 3, seed: seed).links(count: 20)
        #expect(links == LocalMesh.Topology.random(degree: 3, seed: seed).links(count: 20))
        var degrees = [Int](repeating: 0, count: 20)
        for link in links {
            degrees[link.a] += 1
            degrees[link.b] += 1
        }
        #expect(degrees.allSatisfy { (1...3).contains($0) }, "\(degrees)")
        #expect(degrees.filter { $0 == 3 }.count >= 16, "most nodes reach the degree: \(degrees)")
        // Connected: a walk from node 0 reaches every node.
        var reached: Set<Int> = [0]
        var frontier = [0]
        while let node = frontier.popLast() {
            for link in links { if let other = link.other(than: node), reached.insert(other).inserted { frontier.append(other) } }
        }
        #expect(reached.count == 20)
    }
}
