import WeftModel

/// Range-based set reconciliation of published conversation logs (SPEC.md §14.3), after
/// Aljoscha Meyer's range-based set reconciliation and Negentropy: two nodes compare the
/// fingerprint of the whole set, split ranges that differ, and list the items of small ones,
/// until each knows exactly which conversations differ. Two nodes in sync learn it in one
/// round trip of 15 bytes, whatever their size.
///
/// Pure and stateless: everything a round needs is in the message, so either side answers
/// each HAVE from its current set. The caller sends `initiate()` once, answers each HAVE with
/// `respond(to:)`, and unions the `differing` of every round: when a HAVE arrives that
/// `respond` gives no reply to, or a reply is sent that expects none, both sides hold the same
/// set of differing conversations, for which they then exchange heads. A log that changes
/// while a reconciliation runs may be missed by it; push carries such changes.
public struct Reconciler: Sendable {
    /// A side with at most this many items in a range whose fingerprints differ sends them as
    /// an id-list; with more, it splits the range. At least `splitCount`, so no part of a
    /// split is empty. Four, the least that allows: an id-list entry costs 24 bytes and a
    /// fingerprinted part about 11, so splitting a range of more items saves bytes.
    public static let idListThreshold = 4
    /// How many sub-ranges a range with differing fingerprints splits into. Four: a sparse
    /// difference costs 4 fingerprints per level of a tree of base 4, fewer bytes than 8 or 16
    /// per level of base 8 or 16, for more levels, one message each (SPEC.md §14.3, costs).
    public static let splitCount = 4

    public var set: ReconciliationSet

    public init(set: ReconciliationSet) {
        self.set = set
    }

    /// The first HAVE: one fingerprint over every conversation, or an empty id-list for an
    /// empty set (it saves the peer a split).
    public func initiate() -> HaveMessage {
        let mode: ReconciliationRange.Mode = set.isEmpty ? .idList([]) : .fingerprint(set.fingerprint(0..<set.count))
        // One range up to the end, holding a fingerprint or no entry: every rule of §14.3
        // holds whatever the set, so the check cannot fail (no input reaches it).
        let range = ReconciliationRange(upperBound: .end, mode: mode)
        return HaveMessage(checkedRanges: [range])
    }

    /// Answers one HAVE from the peer.
    ///
    /// - Returns: `reply`, the HAVE to send back, nil if `message` expects none (the
    ///   reconciliation is over); `differing`, the conversations this round settled as
    ///   differing (ascending): held by one side only, or with different digests. The peer
    ///   learns the same ones from the reply or has already.
    /// - Throws: `SyncMessageError.invalidBody` if the reply would break a rule of §14.3
    ///   (a bug of the reconciler, but one that input drives: the node closes that connection
    ///   rather than trap).
    public func respond(to message: HaveMessage) throws(SyncMessageError) -> (reply: HaveMessage?, differing: [ConversationID]) {
        var reply = ReplyWriter()
        var differing: [ConversationID] = []
        var lowerIndex = 0
        for range in message.ranges {
            let upperIndex = set.index(of: range.upperBound)
            defer { lowerIndex = upperIndex }
            switch range.mode {
            case .skip:
                reply.skip(to: range.upperBound)
            case .differing(let conversations):
                differing += conversations
                reply.skip(to: range.upperBound)
            case .fingerprint(let theirs):
                answer(fingerprint: theirs, lowerIndex..<upperIndex, upperBound: range.upperBound, into: &reply)
            case .idList(let theirs):
                differing += answer(idList: theirs, lowerIndex..<upperIndex, upperBound: range.upperBound, into: &reply)
            }
        }
        guard message.expectsReply else { return (nil, differing) }
        return (try HaveMessage(ranges: reply.ranges), differing)
    }

    // MARK: - Answers

    /// Skip if our fingerprint of `indices` is `theirs`; else our id-list if we hold few items
    /// there, or a split; or a collapse if the answer does not fit.
    private func answer(
        fingerprint theirs: RangeFingerprint, _ indices: Range<Int>, upperBound: ReconciliationBound,
        into reply: inout ReplyWriter
    ) {
        guard !reply.isCollapsed else { return }
        if set.fingerprint(indices) == theirs {
            reply.skip(to: upperBound)
        } else if indices.count <= Self.idListThreshold, reply.fits(ranges: 1, entries: indices.count) {
            reply.add(ReconciliationRange(upperBound: upperBound, mode: .idList(items(indices))))
        } else if indices.count > Self.idListThreshold, reply.fits(ranges: Self.splitCount, entries: 0) {
            for subrange in split(indices, upperBound: upperBound) { reply.add(subrange) }
        } else {
            reply.collapse(fingerprint: set.fingerprint(indices.lowerBound..<set.count))
        }
    }

    /// The difference between the peer's id-list and our items at `indices`, as a differing
    /// range (or a skip if there is none); returns what it settled. A difference too large for
    /// the reply is settled in part, and the rest collapsed.
    private func answer(
        idList theirs: [ReconciliationItem], _ indices: Range<Int>, upperBound: ReconciliationBound,
        into reply: inout ReplyWriter
    ) -> [ConversationID] {
        guard !reply.isCollapsed else { return [] }
        let budget = reply.remainingEntries
        guard budget > 0, reply.fits(ranges: 1, entries: 1) else {
            reply.collapse(fingerprint: set.fingerprint(indices.lowerBound..<set.count))
            return []
        }
        let found = difference(theirs, indices, limit: budget + 1)
        if found.isEmpty {
            reply.skip(to: upperBound)
            return []
        }
        if found.count <= budget {
            let settled = found.map(\.conversation)
            reply.add(ReconciliationRange(upperBound: upperBound, mode: .differing(settled)))
            return settled
        }
        // More differences than this reply may carry: settle those below the next one, and
        // fingerprint the rest for the peer to split again.
        let bound = ReconciliationKey.separator(between: found[budget - 1], and: found[budget])
        let settled = found[..<budget].map(\.conversation)
        reply.add(ReconciliationRange(upperBound: bound, mode: .differing(settled)))
        reply.collapse(fingerprint: set.fingerprint(set.index(of: bound)..<set.count))
        return settled
    }

    // MARK: - Steps

    private func items(_ indices: Range<Int>) -> [ReconciliationItem] {
        indices.map { ReconciliationItem(conversation: set.keys[$0].conversation, hashPrefix: set.hashes[$0].prefix) }
    }

    /// `splitCount` ranges with about as many of our items each, the last ending at
    /// `upperBound`, each with its fingerprint. Needs more than `splitCount` items.
    private func split(_ indices: Range<Int>, upperBound: ReconciliationBound) -> [ReconciliationRange] {
        var ranges: [ReconciliationRange] = []
        var start = indices.lowerBound
        for part in 1...Self.splitCount {
            let end = indices.lowerBound + indices.count * part / Self.splitCount
            let bound =
                part == Self.splitCount ? upperBound : ReconciliationKey.separator(between: set.keys[end - 1], and: set.keys[end])
            ranges.append(ReconciliationRange(upperBound: bound, mode: .fingerprint(set.fingerprint(start..<end))))
            start = end
        }
        return ranges
    }

    /// The keys, ascending, held on one side only or with different item hashes: the peer's
    /// `theirs` against our items at `indices`. Stops after `limit`, so the work stays bounded
    /// by the peer's list and the limit however many items we hold in the range.
    private func difference(_ theirs: [ReconciliationItem], _ indices: Range<Int>, limit: Int) -> [ReconciliationKey] {
        var found: [ReconciliationKey] = []
        var ours = indices.lowerBound
        var index = 0
        while found.count < limit, index < theirs.count || ours < indices.upperBound {
            let their = index < theirs.count ? ReconciliationKey(theirs[index].conversation) : nil
            let our = ours < indices.upperBound ? set.keys[ours] : nil
            if let their, let our, their == our {
                if theirs[index].hashPrefix != set.hashes[ours].prefix { found.append(our) }
                index += 1
                ours += 1
            } else if let their, our.map({ their < $0 }) ?? true {
                found.append(their)
                index += 1
            } else if let our {
                found.append(our)
                ours += 1
            }
        }
        return found
    }
}

/// Builds a reply: runs of skips become one range, trailing skips are left out (the end is
/// implied), and the limits of `HaveMessage` are kept, one range always in reserve for the
/// fingerprint of whatever a full reply has to leave for the next round.
private struct ReplyWriter {
    private(set) var ranges: [ReconciliationRange] = []
    private var pendingSkip: ReconciliationBound?
    private var entryCount = 0
    /// Whether the reply ends with a collapse: later ranges get no answer, skips included.
    private(set) var isCollapsed = false

    var remainingEntries: Int { HaveMessage.maxEntryCount - entryCount }

    /// Whether `ranges` more ranges with `entries` entries fit, leaving room for a pending
    /// skip and a final collapse.
    func fits(ranges count: Int, entries: Int) -> Bool {
        ranges.count + 1 + count + 1 <= HaveMessage.maxRangeCount && entryCount + entries <= HaveMessage.maxEntryCount
    }

    mutating func skip(to bound: ReconciliationBound) {
        if !isCollapsed { pendingSkip = bound }
    }

    mutating func add(_ range: ReconciliationRange) {
        if let skip = pendingSkip { ranges.append(ReconciliationRange(upperBound: skip, mode: .skip)) }
        pendingSkip = nil
        ranges.append(range)
        entryCount += range.mode.entryCount
    }

    /// Ends the reply with one fingerprint from where it stands to the end.
    mutating func collapse(fingerprint: RangeFingerprint) {
        add(ReconciliationRange(upperBound: .end, mode: .fingerprint(fingerprint)))
        isCollapsed = true
    }
}
