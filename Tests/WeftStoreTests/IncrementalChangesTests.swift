import Testing
import WeftCrypto
import WeftModel

/// `Replica.applyReportingChangesIncrementally` (what the store uses) must report exactly what
/// `applyReportingChanges` (complete views before and after) reports.
@Suite("Replica: incremental change sets equal complete ones")
struct IncrementalChangesTests {
    @Test(
        "batches in causal order (mostly appended messages and receipts) and shuffled ones, with merges, membership changes, watermarks and deletions; all groups, and only those the local user sees",
        arguments: [31, 32, 33, 34] as [UInt64], [false, true])
    func sameChangeSets(seed: UInt64, onlyShown: Bool) {
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
                let (expectedReport, expected) = complete.applyReportingChanges(verified: batch, onlyShown: onlyShown)
                let (report, changes) = incremental.applyReportingChangesIncrementally(verified: batch, onlyShown: onlyShown)
                #expect(report.accepted == expectedReport.accepted)
                #expect(changes == expected, "batch ending at \(index), shuffled: \(shuffled)")
                if onlyShown {
                    #expect(changes.conversations.allSatisfy { incremental.shows($0.id) }, "a group not shown was reported")
                    #expect(changes.messages.allSatisfy { $0.snapshot.map { incremental.shows($0.conversation) } ?? true })
                }
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

    @Test("messages posted while apart arrive later than others (out of order), with receipts: positions move on", arguments: [1, 2, 3] as [UInt64])
    func outOfOrderMessages(seed: UInt64) {
        var rng = SeededGenerator(seed: seed)
        var alice = Author(identity: .generate())
        var bob = Author(identity: .generate())
        var carol = Author(identity: .generate())
        var complete = Replica(localUser: alice.user)
        var incremental = Replica(localUser: alice.user)
        var now: UInt64 = 10_000
        let create = alice.createConversation(with: [bob.user, carol.user], in: complete, wallMilliseconds: now)
        let conversation = create.operation.conversation
        // Each author writes against its own view: Carol's chain depends on nothing of the
        // others', Bob's on Alice's messages at most, which arrive first.
        var views = [Replica(localUser: alice.user), Replica(localUser: bob.user), Replica(localUser: carol.user)]
        for index in views.indices { _ = views[index].apply(verified: [create]) }
        var chains: [[SignedOperation]] = [[], [], []]
        for _ in 0..<120 {
            now += UInt64.random(in: 0...2, using: &rng)
            let who = Int.random(in: 0..<3, using: &rng)
            var author = [alice, bob, carol][who]
            let body: OperationBody
            let others = views[who].messages(in: conversation).filter { $0.sender != author.user }
            if !others.isEmpty, Int.random(in: 0..<4, using: &rng) == 0 {
                body = .delivered(Array(others.suffix(3).map(\.id)))
            } else {
                body = .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [UInt8(who)])], options: .init())
            }
            let op = author.write(body, in: conversation, replica: views[who], wallMilliseconds: now)
            _ = views[who].apply(verified: [op])
            // Bob hears Alice as she writes (his receipts name her messages); Carol hears no one.
            if who == 0 { _ = views[1].apply(verified: [op]) }
            chains[who].append(op)
            if who == 0 { alice = author } else if who == 1 { bob = author } else { carol = author }
        }
        // Alice's chain arrives first, then Bob's and Carol's in pieces: their messages fall
        // among hers, and Bob's receipts name hers.
        var batches: [[SignedOperation]] = [[create] + chains[0]]
        for chain in chains[1...] {
            var start = 0
            while start < chain.count {
                let end = min(chain.count, start + Int.random(in: 1...8, using: &rng))
                batches.append(Array(chain[start..<end]))
                start = end
            }
        }
        for (number, batch) in batches.enumerated() {
            let (expectedReport, expected) = complete.applyReportingChanges(verified: batch)
            let (report, changes) = incremental.applyReportingChangesIncrementally(verified: batch)
            #expect(report.accepted == expectedReport.accepted)
            #expect(changes == expected, "batch \(number)")
        }
        #expect(incremental.messages(in: conversation) == complete.messages(in: conversation))
        #expect(complete.messages(in: conversation).count > 60)
        #expect(chains[1].contains { if case .delivered = $0.operation.body { true } else { false } })
    }
}
