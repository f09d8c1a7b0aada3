import Benchmark
import Foundation
import WeftCrypto
import WeftModel
@_spi(Benchmarks) import WeftStore

#if canImport(Glibc)
import Glibc
#endif

/// The store: applying received operations (verify, store, materialize), Ed25519 verification
/// alone (the limit), and reads from a store of a million messages, with the resident memory of
/// a process that opens it to query, and of one that opens it and writes one message.
///
/// Each benchmark runs in its own process, so the heavy preparation lives in `setup` closures.
func registerStoreBenchmarks() {
    // MARK: - Verification, the limit

    let perOperation = Benchmark.Configuration(
        metrics: [.throughput, .wallClock], scalingFactor: .kilo, maxDuration: .seconds(2))
    Benchmark(
        "Store: Ed25519 verify (1 op, one core)", configuration: perOperation,
        closure: { (benchmark: Benchmark, operations: [SignedOperation]) in
            var index = 0
            for _ in benchmark.scaledIterations {
                blackHole(operations[index].hasValidSignature)
                index = (index + 1) % operations.count
            }
        },
        setup: { StoreFixtures.receivedBatches(count: 1, size: 1_000).first! })

    let perBatch = Benchmark.Configuration(metrics: [.throughput, .wallClock], maxDuration: .seconds(2))
    Benchmark(
        "Store: verify 1,000 signatures (both cores)", configuration: perBatch,
        closure: { (benchmark: Benchmark, operations: [SignedOperation]) in
            for _ in benchmark.scaledIterations {
                blackHole(Store.verifySignatures(operations))
            }
        },
        setup: { StoreFixtures.receivedBatches(count: 1, size: 1_000).first! })

    // MARK: - Applying received operations

    // One iteration applies the next batch of 1,000 to a store on disk (WAL, synchronous FULL),
    // so the conversations grow as the run goes on: ops/s = 1,000 x throughput.
    let batchCount = 40
    let applying = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .peakMemoryResident], warmupIterations: 0, maxDuration: .seconds(30),
        maxIterations: batchCount)
    Benchmark(
        "Store: apply 1,000 received messages (verify, store, materialize)", configuration: applying,
        closure: { (benchmark: Benchmark, fixture: ApplyFixture) async in
            for _ in benchmark.scaledIterations {
                guard let batch = fixture.next() else {
                    benchmark.error("ran out of prepared batches")
                    return
                }
                do {
                    let applied = try await fixture.store.apply(received: batch, wallMilliseconds: StoreFixtures.wallMilliseconds)
                    guard applied.report.accepted.count == batch.count else {
                        benchmark.error("only \(applied.report.accepted.count) of \(batch.count) accepted")
                        return
                    }
                } catch {
                    benchmark.error("apply failed: \(error)")
                }
            }
        },
        setup: { try ApplyFixture(batches: StoreFixtures.receivedBatches(count: batchCount, size: 1_000)) })

    // As the node's storer applies them (Replicator+Storing): each batch's signatures were
    // checked while the batch before it was written, and the next one's are checked while
    // this one is written. ops/s = 1,000 x throughput (the first iteration checks its own).
    Benchmark(
        "Store: apply 1,000 received messages, the next batch checked meanwhile (the node's pipeline)", configuration: applying,
        closure: { (benchmark: Benchmark, fixture: ApplyFixture) async in
            for _ in benchmark.scaledIterations {
                guard let batch = fixture.next() else {
                    benchmark.error("ran out of prepared batches")
                    return
                }
                do {
                    let checked = try await fixture.checking?.value ?? fixture.store.checkSignatures(batch)
                    let store = fixture.store
                    fixture.checking = fixture.peek().map { next in Task.detached { try store.checkSignatures(next) } }
                    let applied = try await store.apply(received: checked, wallMilliseconds: StoreFixtures.wallMilliseconds)
                    guard applied.report.accepted.count == batch.count else {
                        benchmark.error("only \(applied.report.accepted.count) of \(batch.count) accepted")
                        return
                    }
                } catch {
                    benchmark.error("apply failed: \(error)")
                }
            }
        },
        setup: { try ApplyFixture(batches: StoreFixtures.receivedBatches(count: batchCount, size: 1_000)) })

    // Two peers' batches at once, for conversations of their own (as a node syncing with two
    // peers): one batch's signatures are checked while the other is written (the store checks
    // signatures outside its writer queue). ops/s = 2,000 x throughput.
    let concurrentBatchCount = 20
    Benchmark(
        "Store: apply 2 x 1,000 received messages from two peers at once",
        configuration: .init(
            metrics: [.throughput, .wallClock], warmupIterations: 0, maxDuration: .seconds(30),
            maxIterations: concurrentBatchCount),
        closure: { (benchmark: Benchmark, fixture: ConcurrentApplyFixture) async in
            for _ in benchmark.scaledIterations {
                let failures = await fixture.applyNext()
                if !failures.isEmpty { benchmark.error(failures.joined(separator: "; ")) }
            }
        },
        setup: {
            try ConcurrentApplyFixture(streams: [
                StoreFixtures.receivedBatches(count: concurrentBatchCount, size: 1_000, stream: 0),
                StoreFixtures.receivedBatches(count: concurrentBatchCount, size: 1_000, stream: 1),
            ])
        })

    // MARK: - A million messages

    // Builds the cached store if it is missing (a minute or so, once); the benchmarks after it
    // (by name) then find it. Its time is the check, or the build.
    Benchmark(
        "Store: build 1,000,000-message store (cached)",
        configuration: .init(metrics: [.wallClock], warmupIterations: 0, maxIterations: 1)
    ) { benchmark async in
        do {
            try await StoreFixtures.largeStore()
        } catch {
            benchmark.error("building the store failed: \(error)")
        }
    }

    Benchmark(
        "Store: latest 50 messages of a conversation (1,000,000 messages)",
        configuration: .init(metrics: [.wallClock, .throughput], maxDuration: .seconds(3)),
        closure: { (benchmark: Benchmark, fixture: LargeStoreFixture) in
            var index = 0
            for _ in benchmark.scaledIterations {
                do {
                    blackHole(try fixture.store.messages(StoreFixtures.latest(50, in: fixture.conversations[index])))
                } catch {
                    benchmark.error("query failed: \(error)")
                }
                index = (index + 7) % fixture.conversations.count
            }
        },
        setup: {
            let store = try Store(directory: try await StoreFixtures.largeStore(), localUser: StoreFixtures.local.publicKey)
            return LargeStoreFixture(store: store, conversations: try store.conversations(ConversationQuery()).map(\.id))
        })

    // One iteration: open the store, find a conversation, read its latest 50 messages; then the
    // process's resident memory (this benchmark's process does nothing else).
    Benchmark(
        "Store: open + latest 50, resident memory (1,000,000 messages)",
        configuration: .init(
            metrics: [.wallClock, .peakMemoryResident, StoreFixtures.residentMegabytes], warmupIterations: 0,
            maxIterations: 1),
        closure: { (benchmark: Benchmark, directory: URL) in
            do {
                let store = try Store(directory: directory, localUser: StoreFixtures.local.publicKey)
                let conversation = try store.conversations(ConversationQuery(sort: [.init(.lastMessageAt, ascending: false)], limit: 1))
                let messages = try store.messages(StoreFixtures.latest(50, in: conversation[0].id))
                guard messages.count == 50 else { return benchmark.error("\(messages.count) messages, not 50") }
                blackHole(messages)
                benchmark.measurement(StoreFixtures.residentMegabytes, StoreFixtures.residentBytes() / 1_000_000)
            } catch {
                benchmark.error("query failed: \(error)")
            }
        },
        setup: { try await StoreFixtures.largeStore() })

    // One iteration: open the store, then write one message to a conversation of a thousand
    // messages (the store loads that conversation's log, not the million operations); then the
    // process's resident memory. The store is copied first, so the cached one stays as built.
    Benchmark(
        "Store: open + write one message, resident memory (1,000,000 messages)",
        configuration: .init(
            metrics: [.wallClock, .peakMemoryResident, StoreFixtures.residentAfterWrite], warmupIterations: 0,
            maxIterations: 1),
        closure: { (benchmark: Benchmark, copy: StoreCopy) in
            do {
                let store = try Store(directory: copy.directory, localUser: StoreFixtures.local.publicKey)
                let conversation = try store.conversations(ConversationQuery(sort: [.init(.lastMessageAt, ascending: false)], limit: 1))
                let author = try LocalAuthor(store: store, identity: StoreFixtures.local, wallClock: { StoreFixtures.wallMilliseconds })
                let posted = try await author.post(
                    [MessagePart(mimeType: "text/plain", data: Array("one more".utf8))], in: conversation[0].id)
                guard try store.message(posted.id) != nil else { return benchmark.error("the message was not stored") }
                benchmark.measurement(StoreFixtures.residentAfterWrite, StoreFixtures.residentBytes() / 1_000_000)
            } catch {
                benchmark.error("write failed: \(error)")
            }
        },
        setup: { try await StoreCopy(of: StoreFixtures.largeStore()) })
}

/// A copy of the cached million-message store, for a benchmark that writes; removed afterwards.
final class StoreCopy: Sendable {
    let directory: URL

    init(of source: URL) throws {
        directory = ScratchDirectories.make("weft-bench-write")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for file in try FileManager.default.contentsOfDirectory(atPath: source.path) where file.hasPrefix(Store.fileName) {
            try FileManager.default.copyItem(at: source.appendingPathComponent(file), to: directory.appendingPathComponent(file))
        }
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

// MARK: - Fixtures

enum StoreFixtures {
    /// Fixed users, so the cached store and the batches agree run after run.
    static let local = identity(0x11)
    static let peers = [identity(0x22), identity(0x33), identity(0x44)]
    static let wallMilliseconds: UInt64 = 1_800_000_000_000

    static func identity(_ byte: UInt8) -> NodeIdentity {
        NodeIdentity(seed: SecureBytes(copying: [UInt8](repeating: byte, count: NodeIdentity.seedByteCount)))
    }

    static let residentMegabytes = BenchmarkMetric.custom("Resident memory after the query (MB)", polarity: .prefersSmaller, useScalingFactor: false)
    static let residentAfterWrite = BenchmarkMetric.custom("Resident memory after the write (MB)", polarity: .prefersSmaller, useScalingFactor: false)

    /// The process's resident memory now, from /proc/self/statm.
    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func latest(_ count: Int, in conversation: ConversationID) -> MessageQuery {
        MessageQuery([.init(.conversation, .equal, .conversation(conversation))], sort: [.init(.position, ascending: false)], limit: count)
    }

    /// `count` batches of `size` signed messages from the three peers across four
    /// conversations (the first batch creates them), valid in this order. Streams differ in
    /// their conversations.
    static func receivedBatches(count: Int, size: Int, stream: Int = 0) -> [[SignedOperation]] {
        var authors = peers.map { Author(identity: $0) }
        var replica = Replica(localUser: local.publicKey)
        var now = wallMilliseconds - 10_000_000 + UInt64(stream)
        var batches: [[SignedOperation]] = []
        var conversations: [ConversationID] = []
        var senders: [[Int]] = []  // per conversation: the authors in it (no membership changes here)
        for batchNumber in 0..<count {
            var batch: [SignedOperation] = []
            func add(_ op: SignedOperation) {
                _ = replica.apply(verified: [op])
                batch.append(op)
            }
            if batchNumber == 0 {
                for (index, others) in [[1], [2], [1, 2], [0]].enumerated() {
                    let creator = index % authors.count
                    let with = Set(others.map { peers[$0].publicKey } + [local.publicKey]).subtracting([peers[creator].publicKey])
                    let op = authors[creator].createConversation(with: with, distinct: false, in: replica, wallMilliseconds: now)
                    add(op)
                    conversations.append(op.operation.conversation)
                    senders.append(authors.indices.filter { replica.isParticipant(authors[$0].user, of: op.operation.conversation) })
                }
            }
            while batch.count < size {
                now += 1
                let conversationIndex = batch.count % conversations.count
                let conversation = conversations[conversationIndex]
                let choices = senders[conversationIndex]
                let sender = choices[(batch.count / conversations.count) % choices.count]
                let text = "message \(batch.count) of batch \(batchNumber): a chat message of ordinary length."
                add(authors[sender].write(
                    .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(text.utf8))], options: .init()),
                    in: conversation, replica: replica, wallMilliseconds: now))
            }
            batches.append(batch)
        }
        return batches
    }

    static let largeConversations = 1_000
    static let largeMessagesPerConversation = 1_000

    /// The million-message store, built once and cached in /tmp (the version in the name
    /// changes with the schema or the generator).
    @discardableResult
    static func largeStore() async throws -> URL {
        let directory = URL(fileURLWithPath: "/tmp/weft-benchmarks/store-\(largeConversations)x\(largeMessagesPerConversation)-v2")
        let complete = directory.appendingPathComponent("complete")
        if FileManager.default.fileExists(atPath: complete.path) { return directory }
        try? FileManager.default.removeItem(at: directory)
        let started = ContinuousClock.now
        do {
            let store = try Store(directory: directory, localUser: local.publicKey)
            try await store.fillSynthetic(
                conversations: largeConversations, messagesPerConversation: largeMessagesPerConversation, local: local,
                peers: peers
            ) { done in
                if done % 100 == 0 { print("built \(done) of \(largeConversations) conversations in \(ContinuousClock.now - started)") }
            }
        }
        _ = FileManager.default.createFile(atPath: complete.path, contents: Data())
        return directory
    }
}

/// A store on disk and the batches to apply to it, one per iteration.
final class ApplyFixture: @unchecked Sendable {
    // @unchecked: the benchmark runs its iterations on one thread, one after the other.
    let store: Store
    private let batches: [[SignedOperation]]
    private var index = 0
    private let directory: URL

    init(batches: [[SignedOperation]]) throws {
        directory = ScratchDirectories.make("weft-bench-apply")
        store = try Store(directory: directory, localUser: StoreFixtures.local.publicKey)
        self.batches = batches
    }

    /// The next batch's signature check, started while this one is written (the pipelined
    /// benchmark).
    var checking: Task<Store.CheckedBatch, any Error>?

    func next() -> [SignedOperation]? {
        guard index < batches.count else { return nil }
        defer { index += 1 }
        return batches[index]
    }

    /// The batch `next()` returns next, if any.
    func peek() -> [SignedOperation]? { index < batches.count ? batches[index] : nil }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// A store on disk and two streams of batches, one batch of each applied at once per iteration.
final class ConcurrentApplyFixture: @unchecked Sendable {
    // @unchecked: `index` changes only between iterations, on the benchmark's thread.
    let store: Store
    private let streams: [[[SignedOperation]]]
    private var index = 0
    private let directory: URL

    init(streams: [[[SignedOperation]]]) throws {
        directory = ScratchDirectories.make("weft-bench-apply2")
        store = try Store(directory: directory, localUser: StoreFixtures.local.publicKey)
        self.streams = streams
    }

    /// Applies the next batch of every stream, each in its own child task; returns what went wrong.
    func applyNext() async -> [String] {
        guard index < streams[0].count else { return ["ran out of prepared batches"] }
        let batches = streams.map { $0[index] }
        index += 1
        let store = self.store
        return await withTaskGroup(of: String?.self) { group in
            for (stream, batch) in batches.enumerated() {
                group.addTask {
                    do {
                        let applied = try await store.apply(received: batch, wallMilliseconds: StoreFixtures.wallMilliseconds)
                        guard applied.report.accepted.count == batch.count else {
                            return "stream \(stream): \(applied.report.accepted.count) of \(batch.count) accepted"
                        }
                        return nil
                    } catch {
                        return "stream \(stream): \(error)"
                    }
                }
            }
            var failures: [String] = []
            for await failure in group { if let failure { failures.append(failure) } }
            return failures
        }
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

struct LargeStoreFixture: Sendable {
    let store: Store
    let conversations: [ConversationID]
}
