/// The live messages of one log, sorted in the order of SPEC.md §13.5 (timestamp, then
/// sender, then identifier): a message's position among them is a binary search, where
/// counting the messages before it would read the whole log. Receipts name recent messages of
/// long conversations, and each changes their snapshots, which carry positions.
///
/// Messages mostly arrive in order, so an insert is mostly an append; one that arrives late
/// moves the keys after it.
struct MessageOrder: Sendable {
    struct Key: Sendable {
        var timestamp: HLCTimestamp
        var sender: UserID
        var id: OperationID

        init(_ timestamp: HLCTimestamp, _ sender: UserID, _ id: OperationID) {
            self.timestamp = timestamp
            self.sender = sender
            self.id = id
        }

        func precedes(_ other: Key) -> Bool {
            MessageSnapshot.precedes((timestamp, sender, id), (other.timestamp, other.sender, other.id))
        }
    }

    private var keys: [Key] = []

    var count: Int { keys.count }

    /// How many keys precede `key` (its position, were it in the order).
    func countPreceding(_ key: Key) -> Int {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle].precedes(key) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The keys `key` precedes, in order: the messages after it.
    func keys(after key: Key) -> ArraySlice<Key> {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if key.precedes(keys[middle]) { high = middle } else { low = middle + 1 }
        }
        return keys[low...]
    }

    mutating func insert(_ key: Key) {
        if let last = keys.last, !last.precedes(key) {
            keys.insert(key, at: countPreceding(key))
        } else {
            keys.append(key)
        }
    }

    mutating func remove(_ key: Key) {
        let index = countPreceding(key)
        if index < keys.count, keys[index].id == key.id { keys.remove(at: index) }
    }
}
