import Testing
import WeftCrypto
@testable import WeftModel

/// State is a function of the operation set (SPEC.md §13): random schedules of concurrent
/// writers, partial deliveries, reorderings and duplicates must end with every replica showing
/// the same thing, and that thing must be what the rules say (`Oracle`).
@Suite("convergence")
struct ConvergenceTests {
    static let schedulesPerChunk = 125
    static let operationsPerSchedule = 60
    /// Chunks run in parallel; each is `schedulesPerChunk` schedules from its own seeds.
    static let chunks = Array(0..<8)

    @Test("1,000 random schedules of 60 operations on 3 nodes converge to the rules' state", arguments: chunks)
    func randomSchedules(chunk: Int) {
        for offset in 0..<Self.schedulesPerChunk {
            let seed = UInt64(chunk * Self.schedulesPerChunk + offset)
            if let failure = Self.check(seed: seed) {
                Issue.record("seed \(seed): \(failure)")
                return
            }
        }
    }

    /// Runs one schedule; nil when everything holds, else the first thing that does not.
    static func check(seed: UInt64, nodeCount: Int = 3, operations: Int = operationsPerSchedule) -> String? {
        var simulation = Simulation(seed: seed, nodeCount: nodeCount)
        simulation.run(operationCount: operations)
        if let problem = simulation.problems.first { return problem }

        let replicas = simulation.nodes.map(\.replica)
        let reference = ReplicaDigest(replicas[0])
        let allIDs = Set(simulation.written.map(\.id))
        if reference.pendingCount != 0 { return "\(reference.pendingCount) operations still pending with every cause delivered" }
        if reference.accepted.union(reference.rejected) != allIDs || !reference.accepted.isDisjoint(with: reference.rejected) {
            let missing = allIDs.subtracting(reference.accepted).subtracting(reference.rejected)
            return "accepted and rejected do not partition the operations: neither \(missing), both \(reference.accepted.intersection(reference.rejected)); \(simulation.equivocations) equivocations"
        }
        for (index, replica) in replicas.enumerated().dropFirst() {
            if let difference = ReplicaDigest(replica).firstDifference(from: reference) {
                return "node \(index) differs from node 0: \(difference)"
            }
        }

        // The same operations, in three other orders with duplicates, to fresh replicas.
        for order in 0..<3 {
            var fresh = Replica(localUser: Fixtures.users[0])
            let operations = simulation.shuffledWithDuplicates()
            switch order {
            case 0: _ = fresh.apply(verified: operations)
            case 1: fresh.applyEach(operations)
            default: for batch in stride(from: 0, to: operations.count, by: 7) {
                _ = fresh.apply(verified: Array(operations[batch..<min(batch + 7, operations.count)]))
            }
            }
            if let difference = ReplicaDigest(fresh).firstDifference(from: reference) {
                return "a fresh replica fed order \(order) differs: \(difference)"
            }
        }

        // Accepted operations form a causally closed set.
        let byID = Dictionary(simulation.received.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for id in reference.accepted where !byID[id]!.operation.causes.allSatisfy(reference.accepted.contains) {
            return "accepted operation \(id) has a cause that is not accepted"
        }

        // What the rules say, computed apart, for each node's own user.
        for (index, replica) in replicas.enumerated() {
            var oracle = Oracle(accepted: reference.accepted.map { byID[$0]! }, localUser: Fixtures.users[index])
            let expected = oracle.expected()
            if expected.map(\.snapshot.id) != replica.conversationIDs {
                return "node \(index): conversations \(replica.conversationIDs), expected \(expected.map(\.snapshot.id))"
            }
            for group in expected {
                guard let snapshot = replica.conversation(group.snapshot.id) else { return "no conversation \(group.snapshot.id)" }
                if snapshot != group.snapshot { return "node \(index): conversation\n  \(snapshot)\nexpected\n  \(group.snapshot)" }
                let messages = replica.messages(in: group.snapshot.id)
                if messages != group.messages {
                    for (a, b) in zip(messages, group.messages) where a != b { return "node \(index): message\n  \(a)\nexpected\n  \(b)" }
                    return "node \(index): messages \(messages.map(\.id)), expected \(group.messages.map(\.id))"
                }
                for merged in group.snapshot.mergedIDs where replica.conversation(merged)?.id != group.snapshot.id {
                    return "looking up merged \(merged) does not give \(group.snapshot.id)"
                }
            }
        }
        return nil
    }

    @Test("schedules with four nodes and more operations converge", arguments: [1_000_001, 1_000_002, 1_000_003, 1_000_004] as [UInt64])
    func largerSchedules(seed: UInt64) {
        if let failure = Self.check(seed: seed, nodeCount: 4, operations: 200) { Issue.record("seed \(seed): \(failure)") }
    }
}
