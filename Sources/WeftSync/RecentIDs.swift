import WeftModel

/// A set of operation identifiers that keeps only the newest `capacity` (first in, first
/// out): a bounded memory of what was seen, O(1) per insert and lookup. Memory grows with
/// use up to the capacity.
struct RecentIDs: Sendable, Equatable {
    let capacity: Int
    private var members: Set<OperationID> = []
    /// Insertion order; once full, `next` is the oldest slot, overwritten next.
    private var ring: [OperationID] = []
    private var next = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a bounded set holds something")
        self.capacity = capacity
    }

    var count: Int { members.count }

    func contains(_ id: OperationID) -> Bool { members.contains(id) }

    mutating func insert(_ id: OperationID) {
        guard members.insert(id).inserted else { return }
        if ring.count < capacity {
            ring.append(id)
        } else {
            members.remove(ring[next])
            ring[next] = id
            next = (next + 1) % capacity
        }
    }

    /// Forgets an identifier. Its slot stays until overwritten, which then removes nothing
    /// (or a later insertion of the same identifier, early: this is a cache, not a ledger).
    mutating func remove(_ id: OperationID) { members.remove(id) }
}

/// Operations an answer to a peer's WANT leaves out (SPEC.md §14.5): the ones the peer itself
/// said it holds past its heads (it announced them, or sent them), and the ones this node
/// pushed to it within the graft timeout, which are on their way. A snapshot. Nothing else this
/// node sent the peer counts, since a message lost on the way would then never be repaired.
public struct HeldOperations: Sendable, Equatable {
    let ids: RecentIDs?
    let inFlight: Set<OperationID>

    /// Nothing known held.
    public init() {
        ids = nil
        inFlight = []
    }

    init(_ ids: RecentIDs, inFlight: Set<OperationID> = []) {
        self.ids = ids.count == 0 ? nil : ids
        self.inFlight = inFlight
    }

    public func contains(_ id: OperationID) -> Bool { inFlight.contains(id) || (ids?.contains(id) ?? false) }

    public var isEmpty: Bool { ids == nil && inFlight.isEmpty }
}
