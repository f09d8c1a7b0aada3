import Foundation
import WeftControl
import WeftCrypto
import WeftModel
import WeftTestKit

/// `nodes` real `weft node` processes (LocalMesh) in a random mesh of degree 3. Node 0 creates
/// one conversation with every node's user, announced; then `messages` messages are posted at
/// random nodes through their control sockets. The clock runs from the first post until every
/// node's conversation counts every message. The figures come from each node's replication
/// counters (control STATISTICS, SPEC.md §15.4) once the mesh settled (receipts included).
struct Spread {
    var nodes = 20
    var messages = 2_000
    var seed: UInt64 = 7

    struct Result {
        var nodes: Int
        var messages: Int
        var elapsed: Duration
        /// Operations every node holds once the mesh settled (messages, the creation, receipts).
        var operations: Int
        /// Receptions (OPERATIONS arrivals, duplicates included) per operation per node that
        /// did not author it.
        var receptionsPerOperation: Double
        /// The nodes' counters, summed by name.
        var counters: [String: UInt64]
    }

    func run(weft: URL) async throws -> Result {
        try await LocalMesh.with(
            nodes: nodes, topology: .random(degree: 3, seed: seed), options: .init(binary: weft, nodeArguments: ["--log-level", "warning"])
        ) { mesh in
            try await mesh.waitUntilLinked(timeout: .seconds(60))
            let users = mesh.nodes.dropFirst().map(\.user)
            let conversation = try await mesh.nodes[0].createConversation(with: users, distinct: false, announce: true).id
            try await waitUntil("every node to hold the conversation", seconds: 30) {
                for node in mesh.nodes where (try? await node.conversation(conversation)) == nil { return false }
                return true
            }

            var generator = SplitMix64(seed: seed)
            let start = ContinuousClock.now
            for index in 0..<messages {
                let poster = mesh.nodes[Int.random(in: 0..<nodes, using: &generator)]
                _ = try await poster.send("message \(index)", in: conversation)
            }
            try await waitUntil("every node to hold \(messages) messages", seconds: 600, interval: .milliseconds(20)) {
                for node in mesh.nodes where try await node.conversation(conversation).messageCount != messages { return false }
                return true
            }
            let elapsed = ContinuousClock.now - start

            // Receipts keep flowing for a moment: wait until every node holds the same, and
            // the count stays put for a second.
            var settled = (held: UInt64.max, since: ContinuousClock.now)
            try await waitUntil("the mesh to settle", seconds: 120, interval: .milliseconds(100)) {
                var held: Set<UInt64> = []
                for node in mesh.nodes { held.insert(try await node.status().heldOperations ?? 0) }
                guard held.count == 1, let value = held.first else { return false }
                if value != settled.held { settled = (value, ContinuousClock.now) }
                return ContinuousClock.now - settled.since > .seconds(1)
            }
            var counters: [String: UInt64] = [:]
            for node in mesh.nodes {
                for counter in try await node.statistics() { counters[counter.name, default: 0] += counter.value }
            }
            let received = counters["operationsReceived", default: 0]
            return Result(
                nodes: nodes, messages: messages, elapsed: elapsed, operations: Int(settled.held),
                receptionsPerOperation: Double(received) / Double(Int(settled.held) * (nodes - 1)), counters: counters)
        }
    }
}
