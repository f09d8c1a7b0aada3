/// What a node holds of one conversation log, as replication sees it: enough to tell, without
/// listing operations, whether two nodes hold the same operations of the log and, if not,
/// which operations each lacks (SPEC.md §14).
///
/// "Held" means stored in any state: accepted, pending (causes missing) or rejected by the
/// merge rules. Rejected operations replicate too, so that every node sees the same forks
/// and refuses the same operations (§13.1).
public struct LogSummary: Sendable, Hashable {
    public var conversation: ConversationID
    /// For each author, the highest `n` such that the node holds an operation of each of the
    /// author's sequence numbers 1...n in this log. A peer holding more of an author's chain
    /// sends the operations past it.
    public var heads: VersionVector
    /// The sum of the identifiers of every operation held in the log. Equal digests mean equal
    /// sets (up to a 2^-256 collision); it catches what heads cannot: two operations in one
    /// slot (a fork, §13.1), or pending operations past a gap.
    public var digest: SetDigest
    /// How many operations of the log are held.
    public var operationCount: Int
    /// The newest timestamp among them: catch-up sends the most recently active logs first.
    public var lastActivity: HLCTimestamp
    /// Whether the log has left this node: a conversation stays local until a message is
    /// posted in it or it was created announced; every log received from a peer is published.
    public var isPublished: Bool
    /// Whether the node pruned the log (a relayed log past its retention): it holds none of
    /// its operations any more, and keeps this summary as a tombstone so that reconciliation
    /// does not fetch them again. Offer nothing from it: the node cannot send its operations.
    public var isPruned: Bool

    public init(
        conversation: ConversationID, heads: VersionVector = VersionVector(), digest: SetDigest = SetDigest(),
        operationCount: Int = 0, lastActivity: HLCTimestamp = HLCTimestamp(rawValue: 0), isPublished: Bool = true,
        isPruned: Bool = false
    ) {
        self.conversation = conversation
        self.heads = heads
        self.digest = digest
        self.operationCount = operationCount
        self.lastActivity = lastActivity
        self.isPublished = isPublished
        self.isPruned = isPruned
    }
}

/// An order-independent digest of a set of operation identifiers: their sum modulo 2^256,
/// each identifier read as a little-endian 256-bit integer. Adding an identifier is four
/// 64-bit additions, so a log's digest is kept up to date as operations arrive, and digests of
/// disjoint sets add up to the digest of their union (range fingerprints, §14).
public struct SetDigest: Hashable, Sendable {
    /// Least significant limb first.
    public private(set) var limbs: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    public static let byteCount = 32

    public init() {}

    /// The digest from its 32-byte little-endian form (`bytes`); nil for another length.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        limbs = (Self.limb(bytes, 0), Self.limb(bytes, 8), Self.limb(bytes, 16), Self.limb(bytes, 24))
    }

    /// The digest of `ids`.
    public init(_ ids: some Sequence<OperationID>) {
        for id in ids { insert(id) }
    }

    /// Adds one identifier. Inserting the same identifier twice counts it twice: callers add
    /// each stored operation once.
    public mutating func insert(_ id: OperationID) {
        add((Self.limb(id.bytes, 0), Self.limb(id.bytes, 8), Self.limb(id.bytes, 16), Self.limb(id.bytes, 24)))
    }

    /// Removes an identifier added before (a pruned operation).
    public mutating func remove(_ id: OperationID) {
        // Subtracting x is adding its two's complement: ~x + 1.
        var negated = SetDigest()
        negated.add((~Self.limb(id.bytes, 0), ~Self.limb(id.bytes, 8), ~Self.limb(id.bytes, 16), ~Self.limb(id.bytes, 24)))
        negated.add((1, 0, 0, 0))
        add(negated.limbs)
    }

    /// The digest of the union of two disjoint sets.
    public mutating func formUnion(_ other: SetDigest) { add(other.limbs) }

    /// The 32-byte little-endian form.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.byteCount)
        for limb in [limbs.0, limbs.1, limbs.2, limbs.3] {
            for shift in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: limb >> UInt64(shift))) }
        }
        return out
    }

    public var isEmpty: Bool { limbs == (0, 0, 0, 0) }

    public static func == (lhs: SetDigest, rhs: SetDigest) -> Bool { lhs.limbs == rhs.limbs }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(limbs.0)
        hasher.combine(limbs.1)
        hasher.combine(limbs.2)
        hasher.combine(limbs.3)
    }

    private mutating func add(_ other: (UInt64, UInt64, UInt64, UInt64)) {
        let (s0, c0) = limbs.0.addingReportingOverflow(other.0)
        let (t1, c1a) = limbs.1.addingReportingOverflow(other.1)
        let (s1, c1b) = t1.addingReportingOverflow(c0 ? 1 : 0)
        let (t2, c2a) = limbs.2.addingReportingOverflow(other.2)
        let (s2, c2b) = t2.addingReportingOverflow((c1a || c1b) ? 1 : 0)
        let s3 = limbs.3 &+ other.3 &+ ((c2a || c2b) ? 1 : 0)
        limbs = (s0, s1, s2, s3)
    }

    private static func limb(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in (offset..<offset + 8).reversed() { value = value << 8 | UInt64(bytes[index]) }
        return value
    }
}
