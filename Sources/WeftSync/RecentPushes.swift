import WeftModel

/// Operations this node pushed to one peer lately, with when (SPEC.md §14.5): an answer to
/// the peer's WANT leaves out the ones pushed within the graft timeout, which are still on
/// their way. A busy log's reconciliation always finds it differing, and without this every
/// answer would repeat the pushes in flight. Bounded by age and by count.
struct RecentPushes: Sendable {
    let capacity: Int
    /// Oldest first from `start`; entries before it are spent and dropped in bulk.
    private var entries: [(id: OperationID, at: UInt64)] = []
    private var start = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a bounded memory holds something")
        self.capacity = capacity
    }

    var count: Int { entries.count - start }

    /// Records a push at `now`, forgetting pushes older than `now - maxAge` and, past the
    /// capacity, the oldest.
    mutating func insert(_ id: OperationID, at now: UInt64, maxAge: UInt64) {
        entries.append((id, now))
        while start < entries.count, count > capacity || entries[start].at + maxAge < now { start += 1 }
        if start > 1_024, start * 2 > entries.count {
            entries.removeFirst(start)
            start = 0
        }
    }

    /// The identifiers pushed at `since` or later.
    func pushed(since: UInt64) -> Set<OperationID> {
        var ids: Set<OperationID> = []
        var index = entries.count - 1
        while index >= start, entries[index].at >= since {
            ids.insert(entries[index].id)
            index -= 1
        }
        return ids
    }
}
