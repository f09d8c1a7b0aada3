import Testing
import WeftCrypto
import WeftModel
@testable import WeftSync

@Suite("Reconciliation set: growing one conversation at a time costs O(log n) each and ends where a set built at once does")
struct ReconciliationSetGrowthTests {
    /// Every range's fingerprint, keys and item hashes of `set` against `reference`, item by item.
    static func expectSame(_ set: ReconciliationSet, _ reference: ReconciliationSet) {
        #expect(set.count == reference.count)
        guard set.count == reference.count else { return }
        for index in 0..<set.count {
            #expect(set.keys[index] == reference.keys[index] && set.hashes[index] == reference.hashes[index], "item \(index)")
        }
        var mismatches = 0
        for lower in 0...set.count {
            for upper in lower...set.count where set.fingerprint(lower..<upper) != reference.fingerprint(lower..<upper) {
                mismatches += 1
            }
        }
        #expect(mismatches == 0)
    }

    @Test("100,000 new digests inserted one by one: a bounded number of tree steps each, and every range fingerprints as in a set built at once")
    func hundredThousandInserts() async throws {
        let count = 100_000
        let outcome = await reconciliationOffThePool { () -> (visits: Int, prefixMismatches: Int, rangeMismatches: Int, same: Bool) in
            var random = ReconciliationRandom(seed: 11)
            let items = (0..<count).map { _ in (random.conversation(), random.digest()) }
            var set = ReconciliationSet([])
            for (conversation, digest) in items { set.update(conversation, digest: digest) }
            let reference = ReconciliationSet(items)
            // Equal fingerprints of every prefix (sum and count) make every range's equal: a
            // range's sum is the difference of two prefix sums.
            let prefixMismatches = (0...count).filter { set.fingerprint(0..<$0) != reference.fingerprint(0..<$0) }.count
            // And some ranges against the definition, item by item.
            let sorted = items.sorted { $0.0 < $1.0 }
            var rangeMismatches = 0
            for _ in 0..<50 {
                let lower = Int.random(in: 0...count, using: &random)
                let upper = Int.random(in: lower...min(count, lower + 300), using: &random)
                let theirs = ReconciliationSetTests.fingerprint(Array(sorted[lower..<upper]))
                if set.fingerprint(lower..<upper).bytes != theirs { rangeMismatches += 1 }
            }
            return (set.updateVisits, prefixMismatches, rangeMismatches, set.conversations == sorted.map(\.0))
        }
        print("reconciliation set, 100,000 inserts one by one: \(outcome.visits) tree nodes visited, \(Double(outcome.visits) / Double(count)) per insert")
        #expect(outcome.prefixMismatches == 0)
        #expect(outcome.rangeMismatches == 0)
        #expect(outcome.same)
        // A balanced tree visits a few paths of about 2.5 ln n ≈ 29 nodes per insert (about 48
        // in all, seen); an array shifted, or a tree rebuilt, per insert touches n / 2 = 50,000
        // items on average.
        #expect(outcome.visits < count * 150)
    }

    @Test("inserts, new digests and removals in any order: every range of every index as in a set built at once", arguments: [1, 2, 3] as [UInt64])
    func everyRange(seed: UInt64) {
        var random = ReconciliationRandom(seed: seed)
        var current: [ConversationID: SetDigest] = [:]
        var set = ReconciliationSet([])
        for _ in 0..<200 {
            let conversation = random.conversation()
            let digest = random.digest()
            set.update(conversation, digest: digest)
            current[conversation] = digest
        }
        Self.expectSame(set, ReconciliationSet(current.map { ($0.key, $0.value) }))
        for (index, conversation) in current.keys.sorted().enumerated() {
            if index % 3 == 0 {
                set.remove(conversation)
                current[conversation] = nil
            } else if index % 3 == 1 {
                let digest = random.digest()
                set.update(conversation, digest: digest)
                current[conversation] = digest
            }
        }
        Self.expectSame(set, ReconciliationSet(current.map { ($0.key, $0.value) }))
        for conversation in current.keys { set.remove(conversation) }
        #expect(set.isEmpty && set.conversations.isEmpty)
        #expect(set.fingerprint(0..<0) == ReconciliationSet([]).fingerprint(0..<0))
    }
}
