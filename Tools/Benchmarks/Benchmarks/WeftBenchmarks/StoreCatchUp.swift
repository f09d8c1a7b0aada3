import Benchmark
import Foundation
import WeftCrypto
import WeftModel
import WeftStore

/// The store's side of a catch-up: a node that holds nothing receives 100 conversations of
/// 1,000 messages each, 5,000 operations at a time (50 of every conversation per batch, the
/// first batch with the creations), through `LocalAuthor.receive`, as a node applies what peers
/// send: signatures, replica, change set, the local user's delivered receipts (one per
/// conversation per batch), one transaction. 20 iterations apply the whole 100,000.
/// ops/s = 5,000 x throughput.
func registerStoreCatchUpBenchmarks() {
    let batchCount = 20
    Benchmark(
        "Store: catch-up, receive 5,000 operations across 100 conversations",
        configuration: .init(
            metrics: [.throughput, .wallClock, .peakMemoryResident], warmupIterations: 0, maxDuration: .seconds(60),
            maxIterations: batchCount),
        closure: { (benchmark: Benchmark, fixture: CatchUpFixture) async in
            for _ in benchmark.scaledIterations {
                guard let batch = fixture.next() else {
                    benchmark.error("ran out of prepared batches")
                    return
                }
                do {
                    let applied = try await fixture.author.receive(batch)
                    guard applied.report.accepted.count == batch.count else {
                        benchmark.error("only \(applied.report.accepted.count) of \(batch.count) accepted")
                        return
                    }
                } catch {
                    benchmark.error("receive failed: \(error)")
                }
            }
        },
        setup: {
            try CatchUpFixture(batches: StoreFixtures.catchUpBatches(
                conversations: 100, messagesPerConversation: 1_000, batchSize: 5_000))
        })
}

extension StoreFixtures {
    /// A catch-up's operations in batches of `batchSize`: `conversations` conversations, each
    /// created by one of the three peers with the local user and one or two other peers, then
    /// `messagesPerConversation` messages from their peers, batch by batch the same share of
    /// every conversation, each conversation's operations in causal order.
    static func catchUpBatches(conversations count: Int, messagesPerConversation: Int, batchSize: Int) -> [[SignedOperation]] {
        var authors = peers.map { Author(identity: $0) }
        var replica = Replica(localUser: local.publicKey)
        var now = wallMilliseconds - 20_000_000
        var conversations: [ConversationID] = []
        var senders: [[Int]] = []
        var creations: [SignedOperation] = []
        for index in 0..<count {
            now += 1
            let creator = index % authors.count
            let other = (creator + 1 + index / authors.count % 2) % authors.count
            let with: Set<UserID> = [local.publicKey, peers[other].publicKey]
            let op = authors[creator].createConversation(with: with, distinct: false, in: replica, wallMilliseconds: now)
            _ = replica.apply(verified: [op])
            creations.append(op)
            conversations.append(op.operation.conversation)
            senders.append([creator, other])
        }
        var operations = creations
        let perBatch = batchSize / count
        var written = 0
        while written < messagesPerConversation {
            for (index, conversation) in conversations.enumerated() {
                for step in written..<min(messagesPerConversation, written + perBatch) {
                    now += 1
                    let sender = senders[index][step % 2]
                    let text = "message \(step) of a catch-up: a chat message of ordinary length."
                    let op = authors[sender].write(
                        .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(text.utf8))], options: .init()),
                        in: conversation, replica: replica, wallMilliseconds: now)
                    _ = replica.apply(verified: [op])
                    operations.append(op)
                }
            }
            written += perBatch
        }
        return stride(from: 0, to: operations.count, by: batchSize).map { Array(operations[$0..<min(operations.count, $0 + batchSize)]) }
    }
}

/// A store on disk for the local user, its local author, and the batches to receive, one per iteration.
final class CatchUpFixture: @unchecked Sendable {
    // @unchecked: the benchmark runs its iterations on one thread, one after the other.
    let author: LocalAuthor
    private let batches: [[SignedOperation]]
    private var index = 0
    private let directory: URL

    init(batches: [[SignedOperation]]) throws {
        directory = ScratchDirectories.make("weft-bench-catchup")
        let store = try Store(directory: directory, localUser: StoreFixtures.local.publicKey)
        author = try LocalAuthor(store: store, identity: StoreFixtures.local, wallClock: { StoreFixtures.wallMilliseconds })
        self.batches = batches
    }

    func next() -> [SignedOperation]? {
        guard index < batches.count else { return nil }
        defer { index += 1 }
        return batches[index]
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}
