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
    func randomSchedules(chunk: Int) async {
        let (failure, coverage) = await offThePool { () -> (String?, Coverage) in
            var coverage = Coverage()
            for offset in 0..<Self.schedulesPerChunk {
                let seed = UInt64(chunk * Self.schedulesPerChunk + offset)
                if let failure = Self.check(seed: seed, coverage: &coverage) { return ("seed \(seed): \(failure)", coverage) }
            }
            return (nil, coverage)
        }
        if let failure {
            Issue.record("\(failure)")
            return
        }
        // The schedules must reach what they are meant to test: a few of each per chunk.
        print("chunk \(chunk): \(coverage)")
        let minimum = Self.schedulesPerChunk / 20
        #expect(coverage.merges >= minimum, "\(coverage)")
        #expect(coverage.membershipChangedGroups >= minimum, "\(coverage)")
        #expect(coverage.concurrentAddAndRemove >= minimum, "\(coverage)")
        #expect(coverage.refusedNonParticipants >= minimum, "\(coverage)")
        #expect(coverage.readByWatermark >= minimum, "\(coverage)")
        #expect(coverage.deletions >= minimum, "\(coverage)")
        #expect(coverage.forks >= 1, "\(coverage)")
    }

    /// How many schedules reached each situation worth testing.
    struct Coverage: CustomStringConvertible {
        var merges = 0
        var membershipChangedGroups = 0
        var concurrentAddAndRemove = 0
        var refusedNonParticipants = 0
        var readByWatermark = 0
        var deletions = 0
        var forks = 0

        var description: String {
            "merges \(merges), membership changed \(membershipChangedGroups), concurrent add and remove \(concurrentAddAndRemove), "
                + "refused non-participants \(refusedNonParticipants), read by watermark \(readByWatermark), deletions \(deletions), forks \(forks)"
        }
    }

    static func check(seed: UInt64, nodeCount: Int = 3, operations: Int = operationsPerSchedule) -> String? {
        var coverage = Coverage()
        return check(seed: seed, nodeCount: nodeCount, operations: operations, coverage: &coverage)
    }

    /// Runs one schedule; nil when everything holds, else the first thing that does not.
    static func check(seed: UInt64, nodeCount: Int = 3, operations: Int = operationsPerSchedule, coverage: inout Coverage) -> String? {
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

        // What the schedule reached.
        let snapshots = replicas[0].conversations
        if snapshots.contains(where: { !$0.mergedIDs.isEmpty }) { coverage.merges += 1 }
        if snapshots.contains(where: { !$0.isDistinct && replicas[0].creations[$0.id]!.distinct }) { coverage.membershipChangedGroups += 1 }
        if replicas[0].logs.values.contains(where: { !$0.forkedSlots.isEmpty }) { coverage.forks += 1 }
        if replicas[0].logs.values.contains(where: { $0.rejected.values.contains { $0.reason == .notAParticipant } }) {
            coverage.refusedNonParticipants += 1
        }
        if replicas[0].logs.values.contains(where: { !$0.deleted.isEmpty }) { coverage.deletions += 1 }
        var graph = Oracle(accepted: reference.accepted.map { byID[$0]! }, localUser: Fixtures.users[0])
        if Self.hasConcurrentAddAndRemove(reference.accepted.map { byID[$0]! }, graph: &graph) { coverage.concurrentAddAndRemove += 1 }
        struct Receipt: Hashable {
            var user: UserID
            var message: OperationID
        }
        var explicitReads: Set<Receipt> = []
        for id in reference.accepted {
            if case .read(let ids) = byID[id]!.operation.body {
                for message in ids { explicitReads.insert(Receipt(user: byID[id]!.operation.author, message: message)) }
            }
        }
        if snapshots.contains(where: { snapshot in
            replicas[0].messages(in: snapshot.id).contains { message in
                message.recipientStatus.contains { user, status in
                    status == .read && !explicitReads.contains(Receipt(user: user, message: message.id))
                }
            }
        }) { coverage.readByWatermark += 1 }

        // What the rules say, computed apart: everything for node 0, then each other node's unread counts.
        var oracle = Oracle(accepted: reference.accepted.map { byID[$0]! }, localUser: Fixtures.users[0])
        let expected = oracle.expected()
        if expected.map(\.snapshot.id) != replicas[0].conversationIDs {
            return "conversations \(replicas[0].conversationIDs), expected \(expected.map(\.snapshot.id))"
        }
        for group in expected {
            guard let snapshot = replicas[0].conversation(group.snapshot.id) else { return "no conversation \(group.snapshot.id)" }
            if snapshot != group.snapshot { return "conversation\n  \(snapshot)\nexpected\n  \(group.snapshot)" }
            let messages = replicas[0].messages(in: group.snapshot.id)
            if messages != group.messages {
                for (a, b) in zip(messages, group.messages) where a != b { return "message\n  \(a)\nexpected\n  \(b)" }
                return "messages \(messages.map(\.id)), expected \(group.messages.map(\.id))"
            }
            for merged in group.snapshot.mergedIDs where replicas[0].conversation(merged)?.id != group.snapshot.id {
                return "looking up merged \(merged) does not give \(group.snapshot.id)"
            }
            for (index, replica) in replicas.enumerated().dropFirst() {
                let unread = oracle.unreadCount(of: group, for: Fixtures.users[index])
                if replica.conversation(group.snapshot.id)?.unreadCount != unread {
                    return "node \(index): unread count \(replica.conversation(group.snapshot.id)?.unreadCount ?? -1), expected \(unread)"
                }
            }
        }
        return nil
    }

    /// Whether an add and a removal of the same user in one conversation are concurrent.
    static func hasConcurrentAddAndRemove(_ operations: [SignedOperation], graph: inout Oracle) -> Bool {
        struct Key: Hashable {
            var conversation: ConversationID
            var user: UserID
        }
        var adds: [Key: [OperationID]] = [:]
        var removes: [Key: [OperationID]] = [:]
        for op in operations {
            switch op.operation.body {
            case .addParticipants(let users): for user in users { adds[Key(conversation: op.conversation, user: user), default: []].append(op.id) }
            case .removeParticipants(let users): for user in users { removes[Key(conversation: op.conversation, user: user), default: []].append(op.id) }
            default: break
            }
        }
        for (key, addIDs) in adds {
            for add in addIDs {
                for remove in removes[key] ?? [] where !graph.ancestors(of: add).contains(remove) && !graph.ancestors(of: remove).contains(add) {
                    return true
                }
            }
        }
        return false
    }

    @Test("schedules with four nodes and more operations converge", arguments: [1_000_001, 1_000_002, 1_000_003, 1_000_004] as [UInt64])
    func largerSchedules(seed: UInt64) async {
        let failure = await offThePool { Self.check(seed: seed, nodeCount: 4, operations: 200) }
        if let failure { Issue.record("seed \(seed): \(failure)") }
    }
}
