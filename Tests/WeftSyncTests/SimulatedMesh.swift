import Testing
import WeftCrypto
import WeftModel
@testable import WeftSync

/// The seeded generator (WeftCrypto.SplitMix64), so every random schedule replays from its seed.
typealias SeededGenerator = SplitMix64

extension SplitMix64 {
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
}

/// A deterministic in-memory network of nodes, each a `SyncCore` driven like the real node
/// drives it, over a `SimulatedStore`. Messages are encoded and decoded, delayed by a random
/// latency (so they overtake each other), and lost at a rate; links can be cut and healed,
/// nodes stopped and restarted (a restarted node rebuilds its core from its store's summaries
/// and every message in flight to or from it is lost).
struct SimulatedMesh {
    struct Node {
        let identity: NodeIdentity
        var author: Author
        var store: SimulatedStore
        var core: SyncCore
        var isUp = true
        /// Open connections: this side's peer number to the other node and its peer number.
        var connections: [ConnectionNumber: (node: Int, peer: ConnectionNumber)] = [:]
        var user: UserID { identity.publicKey }
    }

    enum Scheduled {
        case deliver(node: Int, peer: ConnectionNumber, payload: [UInt8])
        case writable(node: Int, peer: ConnectionNumber)
    }

    var nodes: [Node]
    var rng: SeededGenerator
    let configuration: SyncConfiguration
    /// Undirected links, as (lower, higher) node indices, and whether each is cut.
    var links: [Link: Bool] = [:]
    var now: UInt64 = 0
    var lossRate = 0.0
    var latency: ClosedRange<UInt64> = 1...30
    /// Whether a connection delivers in order (as TCP does); if not, messages overtake.
    var preservesOrder = false
    /// Per connection (by receiving node and peer), when its last message arrives.
    private var lastArrival: [Int: [ConnectionNumber: UInt64]] = [:]
    private var queue = EventQueue()
    private var nextPeer: ConnectionNumber = 1
    private(set) var messagesSent = 0
    private(set) var bytesSent = 0
    /// Operations the removal rule kept from a peer.
    private(set) var withheldCount = 0

    struct Link: Hashable, Comparable {
        var a: Int
        var b: Int
        init(_ x: Int, _ y: Int) { (a, b) = (min(x, y), max(x, y)) }
        static func < (l: Link, r: Link) -> Bool { (l.a, l.b) < (r.a, r.b) }
    }

    init(nodeCount: Int, degree: Int, seed: UInt64, configuration: SyncConfiguration) {
        self.rng = SeededGenerator(seed: seed)
        self.configuration = configuration
        nodes = (0..<nodeCount).map { index in
            let identity = SyncFixtures.identities[index]
            return Node(
                identity: identity, author: Author(identity: identity), store: SimulatedStore(user: identity.publicKey),
                core: SyncCore(configuration: configuration, localUser: identity.publicKey, summaries: []))
        }
        // A random spanning tree, then random links until the average degree is reached.
        var order = Array(0..<nodeCount)
        order.shuffle(using: &rng)
        for index in 1..<nodeCount { links[Link(order[index], order[Int.random(in: 0..<index, using: &rng)])] = false }
        while links.count < nodeCount * degree / 2 {
            let (x, y) = (Int.random(in: 0..<nodeCount, using: &rng), Int.random(in: 0..<nodeCount, using: &rng))
            if x != y { links[Link(x, y)] = false }
        }
        for link in links.keys.sorted() { connect(link) }
    }

    // MARK: - Topology

    mutating func connect(_ link: Link) {
        guard links[link] == false, nodes[link.a].isUp, nodes[link.b].isUp else { return }
        let (pa, pb) = (nextPeer, nextPeer + 1)
        nextPeer += 2
        nodes[link.a].connections[pa] = (link.b, pb)
        nodes[link.b].connections[pb] = (link.a, pa)
        handle(link.a, .connected(pa, user: nodes[link.b].user))
        handle(link.b, .connected(pb, user: nodes[link.a].user))
    }

    mutating func disconnect(_ link: Link) {
        for (peer, remote) in nodes[link.a].connections where remote.node == link.b {
            nodes[link.a].connections[peer] = nil
            nodes[link.b].connections[remote.peer] = nil
            handle(link.a, .disconnected(peer))
            handle(link.b, .disconnected(remote.peer))
        }
    }

    mutating func cut(_ link: Link) {
        disconnect(link)
        links[link] = true
    }

    mutating func heal(_ link: Link) {
        links[link] = false
        connect(link)
    }

    mutating func stop(_ index: Int) {
        for link in links.keys.sorted() where link.a == index || link.b == index { disconnect(link) }
        nodes[index].isUp = false
    }

    /// Restarts a node on its store: a new core from the summaries, links reconnected.
    mutating func start(_ index: Int) {
        nodes[index].isUp = true
        nodes[index].core = SyncCore(
            configuration: configuration, localUser: nodes[index].user, summaries: nodes[index].store.summaries,
            memberships: nodes[index].store.memberships)
        handle(index, .tick(nowMilliseconds: now))
        for link in links.keys.sorted() where link.a == index || link.b == index { connect(link) }
    }

    // MARK: - Writing

    /// The local user of a node writes `op`.
    mutating func write(_ index: Int, _ op: SignedOperation, announce: Bool = false) {
        let outcome = nodes[index].store.write(op, announce: announce)
        handle(index, .stored(outcome))
    }

    // MARK: - Running

    /// Runs until `time`, ticking every node every `tickInterval`.
    mutating func run(until time: UInt64, tickInterval: UInt64 = 100) {
        while now < time {
            let next = min(time, now + tickInterval)
            while let event = queue.pop(before: next) {
                now = event.time
                switch event.scheduled {
                case .deliver(let node, let peer, let payload):
                    guard nodes[node].isUp, nodes[node].connections[peer] != nil else { continue }
                    do {
                        handle(node, .received(peer, try SyncMessage(payload: payload)))
                    } catch {
                        preconditionFailure("a core sent bytes its peer cannot read: \(error)")
                    }
                case .writable(let node, let peer):
                    guard nodes[node].connections[peer] != nil else { continue }
                    handle(node, .writable(peer, true))
                }
            }
            now = next
            for index in nodes.indices where nodes[index].isUp { handle(index, .tick(nowMilliseconds: now)) }
        }
    }

    /// Makes a connection of a node unwritable for `duration`.
    mutating func stall(_ index: Int, peer: ConnectionNumber, for duration: UInt64) {
        handle(index, .writable(peer, false))
        queue.push(time: now + duration, .writable(node: index, peer: peer))
    }

    /// Feeds one event to a node's core and carries out its actions, as the node's driver does.
    mutating func handle(_ index: Int, _ event: SyncEvent) {
        var events = [event]
        while !events.isEmpty {
            let event = events.removeFirst()
            for action in nodes[index].core.handle(event) {
                switch action {
                case .send(let peer, let message):
                    transmit(message, from: index, peer: peer)
                case .apply(let operations, let source):
                    events.append(.stored(nodes[index].store.receive(operations, from: source)))
                case .sendStored(let peer, let conversation, let beyond, let skipping, let withholding):
                    let operations = nodes[index].store.operations(in: conversation, beyond: beyond)
                    sendAnswer(operations.filter { !skipping.contains($0.id) }, from: index, peer: peer, withholding: withholding)
                    events.append(.storeReadDone(peer))
                case .sendStoredOperations(let peer, let ids, let withholding):
                    sendAnswer(nodes[index].store.operations(ids: ids), from: index, peer: peer, withholding: withholding)
                    events.append(.storeReadDone(peer))
                case .resendWaiting(let peer, _):
                    events.append(.storeReadDone(peer))  // the simulated store keeps no outbox
                case .acknowledged, .dropped:
                    break
                case .close(let peer, let reason):
                    preconditionFailure("node \(index) closes peer \(peer): \(reason)")
                }
            }
        }
    }

    /// Sends what a read found, less what the removal rule the core gave withholds, judged on
    /// the causal pasts the node's replica holds (as the driver does with the store's).
    private mutating func sendAnswer(_ operations: [SignedOperation], from index: Int, peer: ConnectionNumber, withholding: Withholding?) {
        var operations = operations
        if let withholding {
            let replica = nodes[index].store.replica
            var pasts: [OperationID: VersionVector] = [:]
            for signed in operations { pasts[signed.id] = replica.causalPast(of: signed) }
            let judged = operations.count
            operations = withholding.filter(operations, pasts: pasts)
            withheldCount += judged - operations.count
        }
        for chunk in operations.chunked(64) {
            transmit(.operations(SyncMessage.Operations(isPush: false, operations: chunk)), from: index, peer: peer)
        }
    }

    private mutating func transmit(_ message: SyncMessage, from index: Int, peer: ConnectionNumber) {
        guard let remote = nodes[index].connections[peer] else { return }
        guard let payload = try? message.encode() else {
            Issue.record("node \(index) asked to send a \(message.type) message that does not fit")
            return
        }
        messagesSent += 1
        bytesSent += payload.count
        guard !rng.chance(lossRate) else { return }
        var arrival = now + UInt64.random(in: latency, using: &rng)
        if preservesOrder {
            arrival = max(arrival, lastArrival[remote.node]?[remote.peer] ?? 0)
            lastArrival[remote.node, default: [:]][remote.peer] = arrival
        }
        queue.push(time: arrival, .deliver(node: remote.node, peer: remote.peer, payload: payload))
    }
}

/// Scheduled events by time, then by the order they were scheduled in: a binary heap.
struct EventQueue {
    struct Entry {
        var time: UInt64
        var order: UInt64
        var scheduled: SimulatedMesh.Scheduled
    }
    private var heap: [Entry] = []
    private var counter: UInt64 = 0

    private static func before(_ l: Entry, _ r: Entry) -> Bool { (l.time, l.order) < (r.time, r.order) }

    mutating func push(time: UInt64, _ scheduled: SimulatedMesh.Scheduled) {
        counter += 1
        heap.append(Entry(time: time, order: counter, scheduled: scheduled))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.before(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// The earliest entry if it is due before `time`.
    mutating func pop(before time: UInt64) -> Entry? {
        guard let first = heap.first, first.time < time else { return nil }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            let (left, right) = (2 * parent + 1, 2 * parent + 2)
            var least = parent
            if left < heap.count, Self.before(heap[left], heap[least]) { least = left }
            if right < heap.count, Self.before(heap[right], heap[least]) { least = right }
            guard least != parent else { break }
            heap.swapAt(parent, least)
            parent = least
        }
        return first
    }
}
