import WeftCrypto
import WeftModel

/// The items a node offers to reconciliation (SPEC.md §14.3): one per published conversation
/// log, keyed by conversation identifier (ascending by bytes), valued by the log's digest.
///
/// Kept in an `ItemTree`, a balanced search tree whose nodes know the sums of the item hashes
/// below them: the fingerprint of any range, a log's new digest (every message changes one),
/// a new conversation and a removed one each cost O(log n), so a catch-up of k logs among n
/// costs O(k log n). Reading the item at an index costs O(log n) too; a reconciliation reads
/// a handful per range it splits or lists.
public struct ReconciliationSet: Sendable {
    private var tree: ItemTree

    /// The set of `summaries`: for each conversation its log's digest. A conversation listed
    /// twice keeps its last digest.
    public init(_ summaries: [(ConversationID, SetDigest)]) {
        var items = summaries.enumerated().map {
            (key: ReconciliationKey($0.element.0), order: $0.offset, conversation: $0.element.0, digest: $0.element.1)
        }
        items.sort { $0.key < $1.key || ($0.key == $1.key && $0.order < $1.order) }
        let unique = items.indices.lazy
            .filter { $0 + 1 == items.count || items[$0 + 1].key != items[$0].key }
            .map { (items[$0].key, ItemHash(conversation: items[$0].conversation, digest: items[$0].digest)) }
        tree = ItemTree(sorted: unique)
    }

    /// The set of the published, unpruned logs among `summaries` (a log still local to its
    /// node takes no part in reconciliation, SPEC.md §14.3, nor does a pruned one: the node
    /// holds none of its operations and must not fetch them again).
    public init(published summaries: some Sequence<LogSummary>) {
        self.init(summaries.filter(Self.takesPart).map { ($0.conversation, $0.digest) })
    }

    /// Takes in a log's new summary: its digest if it takes part (published, not pruned),
    /// else it leaves the set.
    public mutating func update(_ summary: LogSummary) {
        if Self.takesPart(summary) {
            update(summary.conversation, digest: summary.digest)
        } else {
            remove(summary.conversation)
        }
    }

    private static func takesPart(_ summary: LogSummary) -> Bool { summary.isPublished && !summary.isPruned }

    /// The number of conversations.
    public var count: Int { tree.count }

    public var isEmpty: Bool { tree.count == 0 }

    /// The conversations, ascending.
    public var conversations: [ConversationID] { tree.keys.map(\.conversation) }

    /// Sets the digest of `conversation`'s log, adding the conversation if it is new.
    public mutating func update(_ conversation: ConversationID, digest: SetDigest) {
        let key = ReconciliationKey(conversation)
        let hash = ItemHash(conversation: conversation, digest: digest)
        if let old = tree.hash(of: key) {
            tree.replace(key, with: hash, old: old)
        } else {
            tree.insert(key, hash)
        }
    }

    /// Removes `conversation` (a pruned log); nothing happens if it is not in the set.
    public mutating func remove(_ conversation: ConversationID) {
        let key = ReconciliationKey(conversation)
        guard tree.hash(of: key) != nil else { return }
        tree.remove(key)
    }

    /// Tree nodes visited by updates and removals since the set was built (tests count them).
    var updateVisits: Int { tree.visits }

    // MARK: - Ranges

    /// The keys in ascending order, by index.
    var keys: Items<ReconciliationKey> { Items(tree: tree) { $0.key } }

    /// `hashes[i]` is the item hash of `keys[i]`.
    var hashes: Items<ItemHash> { Items(tree: tree) { $0.hash } }

    /// One part of the items, read by index in O(log n).
    struct Items<Element> {
        let tree: ItemTree
        let part: ((key: ReconciliationKey, hash: ItemHash)) -> Element

        var count: Int { tree.count }

        subscript(index: Int) -> Element { part(tree.item(at: index)) }
    }

    /// The index of the first item at or above `bound` (`count` for the end).
    func index(of bound: ReconciliationBound) -> Int {
        guard let key = bound.key else { return tree.count }
        return firstIndex(notBelow: key)
    }

    /// The index of the first item not below `key`.
    func firstIndex(notBelow key: ReconciliationKey) -> Int { tree.countBelow(key) }

    /// The fingerprint of the items at `indices` (§14.3).
    func fingerprint(_ indices: Range<Int>) -> RangeFingerprint {
        RangeFingerprint(sum: tree.prefixSum(indices.upperBound) - tree.prefixSum(indices.lowerBound), count: indices.count)
    }
}

// MARK: - Items

/// A conversation identifier as two big-endian words: ordering them orders the bytes.
struct ReconciliationKey: Hashable, Comparable, Sendable {
    var high: UInt64
    var low: UInt64

    static let zero = ReconciliationKey(high: 0, low: 0)

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    init(_ conversation: ConversationID) {
        self.init(bytes: conversation.bytes)
    }

    /// The key of up to 16 bytes, padded with zero bytes on the right.
    init(bytes: [UInt8]) {
        if bytes.count == 16 {
            self.init(words: bytes)
        } else {
            self.init(words: bytes + [UInt8](repeating: 0, count: 16 - bytes.count))
        }
    }

    private init(words bytes: [UInt8]) {
        let (high, low) = bytes.withUnsafeBytes { raw in
            (UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
             UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
        self.init(high: high, low: low)
    }

    var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 16) { buffer, count in
            UnsafeMutableRawBufferPointer(buffer).storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
            UnsafeMutableRawBufferPointer(buffer).storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
            count = 16
        }
    }

    var conversation: ConversationID { ConversationID(bytes: bytes)! }

    static func < (lhs: Self, rhs: Self) -> Bool { lhs.high < rhs.high || (lhs.high == rhs.high && lhs.low < rhs.low) }

    /// The shortest bound above `lower` and at or below `upper` (`lower < upper`): `upper`'s
    /// bytes up to and including the first one where the two differ.
    static func separator(between lower: Self, and upper: Self) -> ReconciliationBound {
        let upperBytes = upper.bytes
        let lowerBytes = lower.bytes
        var length = 1
        while upperBytes[length - 1] == lowerBytes[length - 1] { length += 1 }
        return ReconciliationBound(uncheckedPrefix: Array(upperBytes[..<length]))
    }
}

/// BLAKE2b-256(conversation || digest) of one item, as a 256-bit little-endian number for the
/// sums, and its first 8 bytes (big-endian) for id-lists.
struct ItemHash: Hashable, Sendable {
    var sum: Sum256
    var prefix: UInt64

    init(conversation: ConversationID, digest: SetDigest) {
        // One buffer, no joining: this runs for every log at startup.
        let limbs = digest.limbs
        let input = [UInt8](unsafeUninitializedCapacity: 48) { buffer, count in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            conversation.bytes.withUnsafeBytes { raw.copyMemory(from: $0) }
            raw.storeBytes(of: limbs.0.littleEndian, toByteOffset: 16, as: UInt64.self)
            raw.storeBytes(of: limbs.1.littleEndian, toByteOffset: 24, as: UInt64.self)
            raw.storeBytes(of: limbs.2.littleEndian, toByteOffset: 32, as: UInt64.self)
            raw.storeBytes(of: limbs.3.littleEndian, toByteOffset: 40, as: UInt64.self)
            count = 48
        }
        let bytes = BLAKE2b.hash(input, outputByteCount: 32)
        sum = Sum256(littleEndian: bytes)
        prefix = bytes.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
    }
}

/// A number modulo 2^256, least significant limb first: the sum of item hashes of a range,
/// added and subtracted like `SetDigest`.
struct Sum256: Hashable, Sendable {
    var limbs: (UInt64, UInt64, UInt64, UInt64)

    static let zero = Sum256(limbs: (0, 0, 0, 0))

    init(limbs: (UInt64, UInt64, UInt64, UInt64)) { self.limbs = limbs }

    /// The number whose 32-byte little-endian form is `bytes`.
    init(littleEndian bytes: [UInt8]) {
        limbs = bytes.withUnsafeBytes { raw in
            (UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
             UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
             UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
             UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
        }
    }

    var littleEndianBytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            raw.storeBytes(of: limbs.0.littleEndian, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: limbs.1.littleEndian, toByteOffset: 8, as: UInt64.self)
            raw.storeBytes(of: limbs.2.littleEndian, toByteOffset: 16, as: UInt64.self)
            raw.storeBytes(of: limbs.3.littleEndian, toByteOffset: 24, as: UInt64.self)
            count = 32
        }
    }

    static func + (lhs: Self, rhs: Self) -> Self {
        let (s0, c0) = lhs.limbs.0.addingReportingOverflow(rhs.limbs.0)
        let (t1, c1) = lhs.limbs.1.addingReportingOverflow(rhs.limbs.1)
        let (s1, d1) = t1.addingReportingOverflow(c0 ? 1 : 0)
        let (t2, c2) = lhs.limbs.2.addingReportingOverflow(rhs.limbs.2)
        let (s2, d2) = t2.addingReportingOverflow(c1 || d1 ? 1 : 0)
        let s3 = lhs.limbs.3 &+ rhs.limbs.3 &+ (c2 || d2 ? 1 : 0)
        return Sum256(limbs: (s0, s1, s2, s3))
    }

    static func - (lhs: Self, rhs: Self) -> Self {
        let (s0, b0) = lhs.limbs.0.subtractingReportingOverflow(rhs.limbs.0)
        let (t1, b1) = lhs.limbs.1.subtractingReportingOverflow(rhs.limbs.1)
        let (s1, e1) = t1.subtractingReportingOverflow(b0 ? 1 : 0)
        let (t2, b2) = lhs.limbs.2.subtractingReportingOverflow(rhs.limbs.2)
        let (s2, e2) = t2.subtractingReportingOverflow(b1 || e1 ? 1 : 0)
        let s3 = lhs.limbs.3 &- rhs.limbs.3 &- (b2 || e2 ? 1 : 0)
        return Sum256(limbs: (s0, s1, s2, s3))
    }

    static func == (lhs: Self, rhs: Self) -> Bool { lhs.limbs == rhs.limbs }

    func hash(into hasher: inout Hasher) {
        hasher.combine(limbs.0)
        hasher.combine(limbs.1)
        hasher.combine(limbs.2)
        hasher.combine(limbs.3)
    }
}
