import Foundation
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

/// The async signature check (the caller's task suspended, resumed by the checkers' threads)
/// against the blocking one it replaces for async code.
@Suite("Store: async signature checks")
struct AsyncSignatureCheckTests {
    /// Operations from a fixed workload, more than three chunks' worth.
    static let operations: [SignedOperation] = {
        var workload = Workload(seed: 7)
        workload.run(steps: 200)
        return Array(workload.operations.prefix(3 * SignatureCheckers.chunkSize + 5))
    }()

    /// `operations` with the signature of each one `forged` picks broken.
    static func batch(forging forged: (Int) -> Bool) -> (operations: [SignedOperation], valid: [Bool]) {
        let batch = operations.enumerated().map { index, signed in forged(index) ? signed.withBadSignature : signed }
        return (batch, operations.indices.map { !forged($0) })
    }

    @Test("over several chunks, valid and forged signatures mixed: the async check gives the blocking one's results, which are right")
    func sameResults() async throws {
        try #require(Self.operations.count > 3 * SignatureCheckers.chunkSize)
        let (batch, expected) = Self.batch { $0 % 3 == 1 || $0 == Self.operations.count - 1 }
        let checked = await Store.verifySignatures(batch)
        #expect(checked == expected)
        #expect(checked == Self.blocking(batch))

        // An operation marked known is reported valid unchecked, by both.
        let known = batch.indices.map { $0 % 2 == 0 }
        let skipping = await Store.verifySignatures(batch, skipping: known)
        #expect(skipping == zip(expected, known).map { $0 || $1 })
        #expect(skipping == Self.blocking(batch, skipping: known))

        #expect(await Store.verifySignatures([]).isEmpty)
    }

    @Test("Store.checkSignatures: the async one gives the blocking one's batch, with the replica in memory and built first")
    func storeCheck() async throws {
        let directory = try TemporaryDirectory()
        let localUser = NodeIdentity.generate().publicKey
        let (batch, expected) = Self.batch { $0 % 4 == 3 }
        // The store accepted the first chunk already: a resent copy with a broken signature is
        // the same operation (its identifier covers the signed bytes), known, so it passes.
        let store = try Store(directory: directory.url, localUser: localUser)
        let applied = try await store.apply(
            received: Array(Self.operations.prefix(SignatureCheckers.chunkSize)), wallMilliseconds: Workload(seed: 7).now + 1_000_000)
        let accepted = Set(applied.report.accepted)
        try #require(batch.indices.contains { !expected[$0] && accepted.contains(batch[$0].id) }, "a known forged copy")
        try #require(batch.indices.contains { !expected[$0] && !accepted.contains(batch[$0].id) }, "an unknown forged one")

        let async = try await store.checkSignatures(batch)
        #expect(async.operations.map(\.id) == batch.map(\.id))
        #expect(async.valid == batch.indices.map { expected[$0] || accepted.contains(batch[$0].id) })
        #expect(try async.valid == Self.blockingCheck(store, batch).valid)

        // Opened afresh, with no replica in memory: each builds it first (its logs not loaded,
        // a known operation may be checked again, which refuses a forged copy).
        let fresh = try await Store(directory: directory.url, localUser: localUser).checkSignatures(batch)
        let freshBlocking = try Self.blockingCheck(Store(directory: directory.url, localUser: localUser), batch)
        #expect(fresh.valid == freshBlocking.valid)
        for index in batch.indices where expected[index] || !accepted.contains(batch[index].id) {
            #expect(fresh.valid[index] == expected[index], "operation \(index)")
        }
    }

    @Test("more concurrent async checks than cores, each its own batch: all complete with their own batch's results")
    func concurrentChecks() async throws {
        let taskCount = ProcessInfo.processInfo.activeProcessorCount * 16
        let directory = try TemporaryDirectory()
        let store = try Store(directory: directory.url, localUser: NodeIdentity.generate().publicKey)
        let results = await withTaskGroup(of: (Int, [Bool], [Bool]?).self) { group in
            for task in 0..<taskCount {
                group.addTask {
                    // Each task forges its own subset, so a batch given another's results fails.
                    let (batch, _) = Self.batch { ($0 + task) % 7 == 0 }
                    // Half through the store, which all these tasks find without a replica at first.
                    if task % 2 == 0 { return (task, await Store.verifySignatures(batch), nil) }
                    return (task, [], (try? await store.checkSignatures(batch))?.valid)
                }
            }
            var results: [Int: (direct: [Bool], throughStore: [Bool]?)] = [:]
            for await (task, direct, throughStore) in group { results[task] = (direct, throughStore) }
            return results
        }
        #expect(results.count == taskCount)
        for task in 0..<taskCount {
            let expected = Self.batch { ($0 + task) % 7 == 0 }.valid
            if task % 2 == 0 {
                #expect(results[task]?.direct == expected, "task \(task)")
            } else {
                #expect(results[task]?.throughStore == expected, "task \(task) through the store")
            }
        }
    }

    /// The blocking check, called from a synchronous function (where it is the one Swift picks).
    static func blocking(_ batch: [SignedOperation], skipping known: [Bool]? = nil) -> [Bool] {
        Store.verifySignatures(batch, skipping: known)
    }

    static func blockingCheck(_ store: Store, _ batch: [SignedOperation]) throws -> Store.CheckedBatch {
        try store.checkSignatures(batch)
    }
}
