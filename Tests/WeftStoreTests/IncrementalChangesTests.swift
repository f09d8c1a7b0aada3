import Testing
import WeftCrypto
import WeftModel

/// `Replica.applyReportingChangesIncrementally` (what the store uses) must report exactly what
/// `applyReportingChanges` (complete views before and after) reports.
@Suite("Replica: incremental change sets equal complete ones")
struct IncrementalChangesTests {
    @Test("batches in causal order (mostly appended messages and receipts) and shuffled ones, with merges, membership changes, watermarks and deletions", arguments: [31, 32, 33, 34] as [UInt64])
    func sameChangeSets(seed: UInt64) {
        var workload = Workload(seed: seed)
        workload.run(steps: 500)
        workload.gossipAll()
        for shuffled in [false, true] {
            var complete = Replica(localUser: workload.users[0])
            var incremental = Replica(localUser: workload.users[0])
            var rng = SeededGenerator(seed: seed)
            var ops = workload.operations
            if shuffled { for start in stride(from: 0, to: ops.count, by: 30) { ops[start..<min(ops.count, start + 30)].shuffle(using: &rng) } }
            var index = 0
            while index < ops.count {
                let batch = Array(ops[index..<min(ops.count, index + Int.random(in: 1...25, using: &rng))])
                index += batch.count
                let (expectedReport, expected) = complete.applyReportingChanges(verified: batch)
                let (report, changes) = incremental.applyReportingChangesIncrementally(verified: batch)
                #expect(report.accepted == expectedReport.accepted)
                #expect(changes == expected, "batch ending at \(index), shuffled: \(shuffled)")
            }
            #expect(incremental.conversations == complete.conversations)
        }
    }

    @Test("a long conversation growing by appended messages and receipts")
    func appendedMessages() {
        var alice = Author(identity: .generate())
        var bob = Author(identity: .generate())
        var world = Replica(localUser: alice.user)
        var complete = Replica(localUser: alice.user)
        var incremental = Replica(localUser: alice.user)
        var now: UInt64 = 10_000
        let create = alice.createConversation(with: [bob.user], in: world, wallMilliseconds: now)
        _ = world.apply(verified: [create])
        var pending = [create]
        for round in 0..<30 {
            for index in 0..<20 {
                now += 1
                var author = index % 2 == 0 ? alice : bob
                let op = author.write(
                    .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [UInt8(index)])], options: .init()),
                    in: create.operation.conversation, replica: world, wallMilliseconds: now)
                if index % 2 == 0 { alice = author } else { bob = author }
                _ = world.apply(verified: [op])
                pending.append(op)
            }
            // Bob receipts some of Alice's messages.
            let alices = world.messages(in: create.operation.conversation).filter { $0.sender == alice.user }.suffix(3).map(\.id)
            now += 1
            let receipt = bob.write(round % 2 == 0 ? .delivered(alices) : .read(alices), in: create.operation.conversation, replica: world, wallMilliseconds: now)
            _ = world.apply(verified: [receipt])
            pending.append(receipt)
            let (_, expected) = complete.applyReportingChanges(verified: pending)
            let (_, changes) = incremental.applyReportingChangesIncrementally(verified: pending)
            #expect(changes == expected, "round \(round)")
            pending = []
        }
        #expect(incremental.messages(in: create.operation.conversation) == complete.messages(in: create.operation.conversation))
    }
}
