import Foundation
import Logging
import NIOCore
import Synchronization
import Weft
import WeftCrypto
import WeftModel
import WeftNode
import WeftStore
import WeftSync

/// `nodes` in-process nodes (InProcessNode, stores in memory, real loopback sockets) in a
/// random mesh of degree 3: a ring in random order plus a random matching of non-neighbours.
/// Node 0 creates one conversation with every node's user; then `messages` messages are posted
/// at random nodes. The clock runs from the first post until every node's conversation counts
/// every message. In process, because the figure needs the replicator's counters
/// (`Replicator.statistics`), which the control protocol does not report.
struct Spread {
    var nodes = 20
    var messages = 2_000

    struct Result {
        var nodes: Int
        var messages: Int
        var elapsed: Duration
        /// Operations every node holds once the mesh settled (messages, the creation, receipts).
        var operations: Int
        /// Receptions (OPERATIONS arrivals, duplicates included) per operation per node that
        /// did not author it.
        var receptionsPerOperation: Double
        var duplicates: Int
        var grafts: Int
        /// The replicators' counters summed over the nodes.
        var statistics: SyncStatistics
    }

    /// Listening addresses, as the nodes report them.
    private final class Addresses: Sendable {
        let values = Mutex([Int: SocketAddress]())
    }

    func run() async throws -> Result {
        let meshKey = MeshKey.generate()
        let addresses = Addresses()
        var logger = Logger(label: "bench.spread")
        logger.logLevel = .critical
        let members = try (0..<nodes).map { index in
            let identity = NodeIdentity.generate()
            let configuration = MeshNode.Configuration(
                identity: identity, meshKey: meshKey, displayName: "node \(index)",
                redialDelays: [.milliseconds(50), .milliseconds(200), .seconds(1)])
            return try InProcessNode(
                configuration: configuration, store: try Store(directory: nil, localUser: identity.publicKey), logger: logger
            ) { event in
                if case .listening(let address) = event { addresses.values.withLock { $0[index] = address } }
            }
        }
        let edges = Self.randomDegree3(nodes)
        return try await withThrowingTaskGroup { group in
            for member in members { group.addTask { try await member.run() } }
            defer { group.cancelAll() }
            try await waitUntil("every node to listen", seconds: 20) { addresses.values.withLock { $0.count } == nodes }
            let listening = addresses.values.withLock { $0 }
            for (from, to) in edges {
                let address = listening[to]!
                members[from].node.connect(to: PeerAddress(host: address.ipAddress!, port: address.port!))
            }
            try await waitUntil("the mesh to connect", seconds: 30) {
                members.allSatisfy { $0.node.connectedPeers.count == 3 }
            }

            let users = Set(members.map(\.client.localUser))
            let conversation = try await members[0].client.createConversation(
                with: users, options: ConversationOptions(distinct: false, announce: true))
            try await waitUntil("every node to hold the conversation", seconds: 30) {
                for member in members where try await member.client.conversation(conversation.id) == nil { return false }
                return true
            }

            let start = ContinuousClock.now
            for index in 0..<messages {
                let poster = members[Int.random(in: 0..<nodes)]
                try await poster.client.send([.text("message \(index)")], in: conversation.id)
            }
            try await waitUntil("every node to hold \(messages) messages", seconds: 300, interval: .milliseconds(5)) {
                for member in members where try await member.client.conversation(conversation.id)?.totalMessageCount != messages {
                    return false
                }
                return true
            }
            let elapsed = ContinuousClock.now - start

            // Receipts keep flowing for a moment: wait until every node holds the same, and
            // the count stays put for half a second.
            var settled = (held: -1, since: ContinuousClock.now)
            try await waitUntil("the mesh to settle", seconds: 60, interval: .milliseconds(50)) {
                let held = Set(members.map { $0.replicator.heldOperations })
                guard held.count == 1, let value = held.first else { return false }
                if value != settled.held { settled = (value, ContinuousClock.now) }
                return ContinuousClock.now - settled.since > .milliseconds(500)
            }
            let statistics = members.map { $0.replicator.statistics }
            let received = statistics.reduce(0) { $0 + $1.operationsReceived }
            return Result(
                nodes: nodes, messages: messages, elapsed: elapsed, operations: settled.held,
                receptionsPerOperation: Double(received) / Double(settled.held * (nodes - 1)),
                duplicates: statistics.reduce(0) { $0 + $1.duplicatesReceived },
                grafts: statistics.reduce(0) { $0 + $1.grafts },
                statistics: statistics.reduce(into: SyncStatistics()) { total, one in
                    total.operationsPushed += one.operationsPushed
                    total.operationsAnnounced += one.operationsAnnounced
                    total.prunesSent += one.prunesSent
                    total.causeRequests += one.causeRequests
                    total.reconciliationRequests += one.reconciliationRequests
                    total.logsSentFromStore += one.logsSentFromStore
                    total.messagesNotQueued += one.messagesNotQueued
                    total.reconciliations += one.reconciliations
                })
        }
    }

    /// Edges (dialer, listener) of a random 3-regular graph on `count` (even) nodes: a ring in
    /// random order, then a random perfect matching whose pairs are neither ring neighbours
    /// nor repeated (drawn again until it is).
    static func randomDegree3(_ count: Int) -> [(Int, Int)] {
        let ring = (0..<count).shuffled()
        var edges = Set<[Int]>()
        for index in 0..<count { edges.insert([ring[index], ring[(index + 1) % count]].sorted()) }
        while true {
            let order = (0..<count).shuffled()
            let matching = stride(from: 0, to: count, by: 2).map { [order[$0], order[$0 + 1]].sorted() }
            if matching.allSatisfy({ !edges.contains($0) }) {
                return (Array(edges) + matching).map { ($0[0], $0[1]) }
            }
        }
    }
}
