import WeftCrypto

extension LocalMesh {
    /// Which nodes are linked (each link is dialed by one of its two nodes).
    public enum Topology: Sendable, Hashable {
        /// Every node with every other.
        case full
        /// 0–1–2–…–(n−1): a message from one end crosses every node.
        case line
        /// A line closed into a circle.
        case ring
        /// A connected random graph where every node has about `degree` links (at least one,
        /// at most `degree` where the draw allows), drawn from `seed`: the same seed gives the
        /// same links.
        case random(degree: Int, seed: UInt64)
        /// Exactly these links.
        case links([Link])

        /// The links among `count` nodes.
        public func links(count: Int) -> Set<Link> {
            switch self {
            case .full:
                return Set((0..<count).flatMap { a in (a + 1..<max(a + 1, count)).map { Link(a, $0) } })
            case .line:
                return Set((0..<max(0, count - 1)).map { Link($0, $0 + 1) })
            case .ring:
                guard count > 2 else { return Topology.line.links(count: count) }
                return Topology.line.links(count: count).union([Link(count - 1, 0)])
            case .random(let degree, let seed):
                return Self.randomLinks(count: count, degree: max(1, degree), seed: seed)
            case .links(let links):
                return Set(links)
            }
        }

        /// A random spanning tree (so the graph is connected), then random links between nodes
        /// still under `degree` until no two such nodes are unlinked.
        private static func randomLinks(count: Int, degree: Int, seed: UInt64) -> Set<Link> {
            var generator = SplitMix64(seed: seed)
            var links = Set<Link>()
            var degrees = [Int](repeating: 0, count: count)
            var order = Array(0..<count)
            order.shuffle(using: &generator)
            for (position, node) in order.enumerated().dropFirst() {
                let earlier = order[..<position]
                let open = earlier.filter { degrees[$0] < degree }
                let other = (open.isEmpty ? Array(earlier) : open).randomElement(using: &generator)!
                links.insert(Link(node, other))
                degrees[node] += 1
                degrees[other] += 1
            }
            while true {
                var candidates: [Link] = []
                for a in 0..<count where degrees[a] < degree {
                    for b in a + 1..<max(a + 1, count) where degrees[b] < degree && !links.contains(Link(a, b)) {
                        candidates.append(Link(a, b))
                    }
                }
                guard let link = candidates.randomElement(using: &generator) else { return links }
                links.insert(link)
                degrees[link.a] += 1
                degrees[link.b] += 1
            }
        }
    }

    /// A link between two nodes, by index; `Link(1, 0) == Link(0, 1)`.
    public struct Link: Hashable, Sendable, CustomStringConvertible {
        /// The lesser index.
        public let a: Int
        /// The greater index.
        public let b: Int

        public init(_ a: Int, _ b: Int) {
            precondition(a != b, "a link joins two different nodes")
            self.a = min(a, b)
            self.b = max(a, b)
        }

        /// The other end of the link from `node`, or nil if `node` is not an end.
        public func other(than node: Int) -> Int? { node == a ? b : node == b ? a : nil }

        public var description: String { "\(a)–\(b)" }
    }
}
