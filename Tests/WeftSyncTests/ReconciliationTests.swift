import Testing
import WeftCrypto
import WeftModel
import WeftSync

@Suite("Reconciliation: both sides learn the symmetric difference (SPEC.md §14.3)")
struct ReconciliationTests {
    struct Shape: Sendable, CustomTestStringConvertible {
        var shared: Int
        var changed: Int
        var onlyInitiator: Int
        var onlyResponder: Int
        var testDescription: String { "\(shared) shared (\(changed) changed), +\(onlyInitiator) / +\(onlyResponder)" }
    }

    static let cases: [Shape] = [
        Shape(shared: 0, changed: 0, onlyInitiator: 0, onlyResponder: 0),
        Shape(shared: 1, changed: 0, onlyInitiator: 0, onlyResponder: 0),
        Shape(shared: 1, changed: 1, onlyInitiator: 0, onlyResponder: 0),
        Shape(shared: 0, changed: 0, onlyInitiator: 5, onlyResponder: 0),
        Shape(shared: 0, changed: 0, onlyInitiator: 0, onlyResponder: 40),
        Shape(shared: 17, changed: 1, onlyInitiator: 0, onlyResponder: 0),
        Shape(shared: 300, changed: 3, onlyInitiator: 2, onlyResponder: 4),
        Shape(shared: 300, changed: 0, onlyInitiator: 300, onlyResponder: 300),
        Shape(shared: 2_000, changed: 50, onlyInitiator: 20, onlyResponder: 30),
        Shape(shared: 0, changed: 0, onlyInitiator: 0, onlyResponder: 10_000),
        Shape(shared: 0, changed: 0, onlyInitiator: 10_000, onlyResponder: 0),
        Shape(shared: 10_000, changed: 0, onlyInitiator: 0, onlyResponder: 0),
        Shape(shared: 9_000, changed: 200, onlyInitiator: 300, onlyResponder: 700),
    ]

    @Test("fixed shapes end with the true difference on both sides", arguments: cases)
    func shapes(_ shape: Shape) async throws {
        let run = try await reconciliationOffThePool {
            let pair = randomPair(
                seed: UInt64(shape.shared * 31 + shape.onlyResponder), shared: shape.shared, changed: shape.changed,
                onlyInitiator: shape.onlyInitiator, onlyResponder: shape.onlyResponder)
            return Result { (try reconcile(pair.initiator, pair.responder), pair.differing) }
        }.get()
        #expect(run.0.initiatorDiffering == run.1)
        #expect(run.0.responderDiffering == run.1)
        #expect(run.0.messages < 40)
    }

    @Test("seeded random sets of 0 to 10,000 items end with the true difference on both sides")
    func randomSets() async throws {
        let failures = await reconciliationOffThePool { () -> [String] in
            var failures: [String] = []
            var random = ReconciliationRandom(seed: 7)
            for seed in UInt64(0)..<40 {
                // Mostly small sets, a few large ones: debug builds stay fast.
                let shared = seed % 10 == 9 ? Int.random(in: 0...10_000, using: &random) : Int.random(in: 0...400, using: &random)
                let changed = Int.random(in: 0...min(shared, 30), using: &random)
                let onlyInitiator = Int.random(in: 0...(seed % 3 == 0 ? 0 : 40), using: &random)
                let onlyResponder = Int.random(in: 0...(seed % 4 == 0 ? 0 : 40), using: &random)
                let pair = randomPair(
                    seed: seed, shared: shared, changed: changed, onlyInitiator: onlyInitiator, onlyResponder: onlyResponder)
                do {
                    let run = try reconcile(pair.initiator, pair.responder)
                    if run.initiatorDiffering != pair.differing || run.responderDiffering != pair.differing {
                        failures.append("seed \(seed): \(shared) shared, \(changed) changed, +\(onlyInitiator)/+\(onlyResponder)")
                    }
                } catch {
                    failures.append("seed \(seed): \(error)")
                }
            }
            return failures
        }
        #expect(failures == [])
    }

    @Test("two sets of 10,000 identical logs learn it in one round trip of 15 bytes")
    func inSync() throws {
        let pair = randomPair(seed: 1, shared: 10_000, changed: 0, onlyInitiator: 0, onlyResponder: 0)
        let run = try reconcile(pair.initiator, pair.responder)
        print("reconciliation, 10,000 identical logs: \(run.totalBytes) bytes (\(run.initiatorBytes) + \(run.responderBytes)), \(run.messages) messages")
        #expect(run.messages == 2)
        // Type, range count, a fingerprint to the end (head and 8 bytes); type and no ranges.
        #expect(run.initiatorBytes == 1 + 2 + 1 + RangeFingerprint.byteCount)
        #expect(run.responderBytes == 3)
        #expect(run.initiatorDiffering.isEmpty && run.responderDiffering.isEmpty)
    }

    @Test("bytes to find 1, 10 and 100 differing logs among 10,000", arguments: [1, 10, 100])
    func bytesPerDifference(_ count: Int) async throws {
        let run = try await reconciliationOffThePool {
            let pair = randomPair(seed: UInt64(count), shared: 10_000, changed: count, onlyInitiator: 0, onlyResponder: 0)
            return Result { (try reconcile(pair.initiator, pair.responder), pair.differing) }
        }.get()
        print(
            "reconciliation, 10,000 logs, \(count) differing: \(run.0.totalBytes) bytes (\(run.0.initiatorBytes) + \(run.0.responderBytes)), \(run.0.messages) messages, \(run.0.ranges) ranges"
        )
        #expect(run.0.initiatorDiffering == run.1 && run.0.responderDiffering == run.1)
        // A bound from the cost of the design, so that a regression shows: a sparse difference
        // costs a split of 4 fingerprints (about 11 bytes each with head and bound) per level
        // of a tree of base 4 (5 to 6 levels among 10,000), then an id-list of at most 4
        // items (24 bytes each) and a differing entry (16): about 300 bytes.
        #expect(run.0.totalBytes < 300 + count * 300)
        // One message per level, and the id-list and differing rounds (SPEC.md §14.3).
        #expect(run.0.messages <= 10)
    }
}

@Suite("Reconciliation set: fingerprints and updates")
struct ReconciliationSetTests {
    /// The fingerprint §14.3 defines, computed from the definition item by item.
    static func fingerprint(_ items: [(ConversationID, SetDigest)]) -> [UInt8] {
        var sum = SetDigest()
        for (conversation, digest) in items {
            sum.formUnion(SetDigest(bytes: BLAKE2b.hash(conversation.bytes, digest.bytes, outputByteCount: 32))!)
        }
        var count: [UInt8] = []
        for shift in stride(from: 56, through: 0, by: -8) { count.append(UInt8(truncatingIfNeeded: UInt64(items.count) >> UInt64(shift))) }
        return BLAKE2b.hash(sum.bytes, count, outputByteCount: 8)
    }

    /// The whole-set fingerprint the set sends first.
    static func sentFingerprint(_ set: ReconciliationSet) -> [UInt8]? {
        guard case .fingerprint(let fingerprint) = Reconciler(set: set).initiate().ranges.first?.mode else { return nil }
        return fingerprint.bytes
    }

    @Test("the first HAVE carries the fingerprint of the definition; an empty set sends an empty id-list")
    func initiate() throws {
        var random = ReconciliationRandom(seed: 3)
        let items = (0..<50).map { _ in (random.conversation(), random.digest()) }
        #expect(Self.sentFingerprint(ReconciliationSet(items)) == Self.fingerprint(items))
        let empty = Reconciler(set: ReconciliationSet([])).initiate()
        #expect(empty.ranges == [ReconciliationRange(upperBound: .end, mode: .idList([]))])
        #expect(empty.expectsReply)
    }

    @Test("update and remove give the set built from scratch, whatever the order")
    func updates() throws {
        var random = ReconciliationRandom(seed: 4)
        var current: [ConversationID: SetDigest] = [:]
        var set = ReconciliationSet([])
        for step in 0..<600 {
            let existing = current.keys.sorted()
            if step % 5 == 0, let victim = existing.randomElement(using: &random) {
                set.remove(victim)
                current[victim] = nil
            } else if step % 3 == 0 || existing.isEmpty {
                let conversation = random.conversation()
                let digest = random.digest()
                set.update(conversation, digest: digest)
                current[conversation] = digest
            } else {
                let conversation = existing.randomElement(using: &random)!
                let digest = random.digest()
                set.update(conversation, digest: digest)
                current[conversation] = digest
            }
            if step % 50 == 49 {
                let scratch = ReconciliationSet(current.map { ($0.key, $0.value) })
                #expect(set.conversations == scratch.conversations)
                #expect(Self.sentFingerprint(set) == Self.sentFingerprint(scratch))
                #expect(Self.sentFingerprint(set) == Self.fingerprint(current.map { ($0.key, $0.value) }))
            }
        }
        set.remove(random.conversation())  // absent: nothing happens
        #expect(set.count == current.count)
    }

    @Test("only published logs take part; a summary updates or removes its log")
    func summaries() throws {
        var random = ReconciliationRandom(seed: 8)
        let published = LogSummary(conversation: random.conversation(), digest: random.digest())
        let local = LogSummary(conversation: random.conversation(), digest: random.digest(), isPublished: false)
        var set = ReconciliationSet(published: [published, local])
        #expect(set.conversations == [published.conversation])

        var changed = published
        changed.digest = random.digest()
        set.update(changed)
        #expect(Self.sentFingerprint(set) == Self.fingerprint([(changed.conversation, changed.digest)]))
        var announced = local
        announced.isPublished = true
        set.update(announced)
        #expect(set.count == 2)
        changed.isPublished = false
        set.update(changed)
        #expect(set.conversations == [announced.conversation])
    }

    @Test("a conversation listed twice keeps its last digest")
    func duplicates() throws {
        var random = ReconciliationRandom(seed: 5)
        let conversation = random.conversation()
        let (first, last) = (random.digest(), random.digest())
        let set = ReconciliationSet([(conversation, first), (conversation, last)])
        #expect(set.count == 1)
        #expect(Self.sentFingerprint(set) == Self.fingerprint([(conversation, last)]))
    }

    @Test("a set answers each sub-range's fingerprint like one holding only that range's items")
    func subRanges() throws {
        // A responder splits the whole range; the fingerprints of the parts it sends match the
        // definition over the items each part holds.
        var random = ReconciliationRandom(seed: 6)
        let items = (0..<500).map { _ in (random.conversation(), random.digest()) }.sorted { $0.0 < $1.0 }
        let set = ReconciliationSet(items)
        let (reply, _) = try Reconciler(set: set).respond(to: Reconciler(set: ReconciliationSet([])).initiate())
        // The empty set's id-list: the reply lists every item as differing.
        #expect(reply?.ranges.flatMap { range -> [ConversationID] in
            if case .differing(let conversations) = range.mode { return conversations } else { return [] }
        } == items.map(\.0))

        let other = ReconciliationSet(Array(items.dropFirst()))
        let split = try #require(try Reconciler(set: set).respond(to: Reconciler(set: other).initiate()).reply)
        #expect(split.ranges.count == Reconciler.splitCount)
        var lower = 0
        for range in split.ranges {
            let upper = range.upperBound.isEnd ? items.count : items.firstIndex { $0.0.bytes.lexicographicallyPrecedes(range.upperBound.prefix!) == false }!
            guard case .fingerprint(let fingerprint) = range.mode else {
                Issue.record("expected a fingerprint, got \(range.mode)")
                continue
            }
            #expect(fingerprint.bytes == Self.fingerprint(Array(items[lower..<upper])))
            #expect((upper - lower) >= 500 / Reconciler.splitCount)
            lower = upper
        }
    }
}
