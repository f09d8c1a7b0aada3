/// The items of a `ReconciliationSet` in key order, as a treap (a binary search tree kept
/// balanced by random priorities in heap order) whose nodes know the size and the sum of item
/// hashes of their subtree: finding a key, the item at an index, the sum of the first k items,
/// inserting, changing and removing an item each visit one path from the root, O(log n)
/// expected.
///
/// Priorities come from `Hasher`, seeded at random for each process: the tree's shape follows
/// from the keys and that seed, so a peer that chooses conversation identifiers cannot
/// choose a degenerate (list-like) tree. The recursive operations go as deep as the tree,
/// about 2.5 ln n levels (some 35 for a million items).
///
/// Nodes live in one array (value semantics for free; a removed node's slot is filled by the
/// last one), linked by index.
struct ItemTree: Sendable {
    private struct Node: Sendable {
        var key: ReconciliationKey
        var hash: ItemHash
        /// At least the priority of either child.
        var priority: Int
        var left: Int32 = ItemTree.none
        var right: Int32 = ItemTree.none
        /// Items in this subtree.
        var size: Int32 = 1
        /// Their item hashes added up.
        var sum: Sum256

        init(key: ReconciliationKey, hash: ItemHash) {
            self.key = key
            self.hash = hash
            self.sum = hash.sum
            var hasher = Hasher()
            hasher.combine(key)
            priority = hasher.finalize()
        }
    }

    private static let none: Int32 = -1

    private var nodes: [Node] = []
    private var root = ItemTree.none
    /// Nodes visited by `insert`, `replace` and `remove` since the tree was built: what they
    /// cost, for tests to check without timing them.
    private(set) var visits = 0

    /// The tree of `items`, ascending by key without duplicates, built in O(n): a Cartesian
    /// tree by priority, with a stack of its right spine.
    init(sorted items: some Sequence<(ReconciliationKey, ItemHash)>) {
        var spine: [Int32] = []
        for (key, hash) in items {
            let index = Int32(nodes.count)
            nodes.append(Node(key: key, hash: hash))
            var below = Self.none
            while let top = spine.last, nodes[top].priority < nodes[index].priority { below = spine.removeLast() }
            nodes[index].left = below
            if let top = spine.last { nodes[top].right = index }
            spine.append(index)
        }
        root = spine.first ?? Self.none
        summarize(root)
    }

    var count: Int { size(root) }

    // MARK: - Reading

    /// The item at `index` in key order (`0 <= index < count`).
    func item(at index: Int) -> (key: ReconciliationKey, hash: ItemHash) {
        // Indices come from the tree's own search (`ReconciliationSet.index(of:)`), never from a peer.
        precondition(index >= 0 && index < count, "item \(index) of \(count)")
        var node = root
        var index = index
        while true {
            let left = size(nodes[node].left)
            if index < left {
                node = nodes[node].left
            } else if index == left {
                return (nodes[node].key, nodes[node].hash)
            } else {
                index -= left + 1
                node = nodes[node].right
            }
        }
    }

    /// The number of items below `key`: the index of the first item not below it.
    func countBelow(_ key: ReconciliationKey) -> Int {
        var node = root
        var below = 0
        while node != Self.none {
            if nodes[node].key < key {
                below += size(nodes[node].left) + 1
                node = nodes[node].right
            } else {
                node = nodes[node].left
            }
        }
        return below
    }

    /// The item hashes of the first `count` items added up.
    func prefixSum(_ count: Int) -> Sum256 {
        var sum = Sum256.zero
        var node = root
        var count = count
        while node != Self.none, count > 0 {
            let left = size(nodes[node].left)
            if count <= left {
                node = nodes[node].left
            } else {
                sum = sum + self.sum(nodes[node].left) + nodes[node].hash.sum
                count -= left + 1
                node = nodes[node].right
            }
        }
        return sum
    }

    /// The item hash of `key`, nil if the tree does not hold it.
    func hash(of key: ReconciliationKey) -> ItemHash? {
        var node = root
        while node != Self.none {
            if key == nodes[node].key { return nodes[node].hash }
            node = key < nodes[node].key ? nodes[node].left : nodes[node].right
        }
        return nil
    }

    /// Every key, ascending.
    var keys: [ReconciliationKey] {
        var keys: [ReconciliationKey] = []
        keys.reserveCapacity(count)
        var pending: [Int32] = []
        var node = root
        while node != Self.none || !pending.isEmpty {
            while node != Self.none {
                pending.append(node)
                node = nodes[node].left
            }
            node = pending.removeLast()
            keys.append(nodes[node].key)
            node = nodes[node].right
        }
        return keys
    }

    // MARK: - Changing

    /// Adds an item whose key the tree does not hold.
    mutating func insert(_ key: ReconciliationKey, _ hash: ItemHash) {
        // One item per log held (bounded by the store, far below 2^31), not per peer message.
        precondition(nodes.count < Int32.max, "an item tree holds fewer than 2^31 items")
        let node = Int32(nodes.count)
        nodes.append(Node(key: key, hash: hash))
        let (below, above) = split(root, below: key)
        root = merge(merge(below, node), above)
    }

    /// Gives the item of `key`, which the tree holds, another hash: the sums on its path
    /// change by the difference.
    mutating func replace(_ key: ReconciliationKey, with hash: ItemHash, old: ItemHash) {
        let delta = hash.sum - old.sum
        var node = root
        while node != Self.none {
            visits += 1
            nodes[node].sum = nodes[node].sum + delta
            if key == nodes[node].key {
                nodes[node].hash = hash
                return
            }
            node = key < nodes[node].key ? nodes[node].left : nodes[node].right
        }
        // `ReconciliationSet.update` replaces only keys it found in the tree.
        preconditionFailure("replace(_:with:old:) of a key the tree does not hold")
    }

    /// Removes the item of `key`, which the tree holds.
    mutating func remove(_ key: ReconciliationKey) {
        var removed = Self.none
        root = remove(key, from: root, removed: &removed)
        // Fill the slot with the last node, and point its parent at the slot.
        let last = Int32(nodes.count - 1)
        if removed != last {
            nodes[removed] = nodes[last]
            if root == last {
                root = removed
            } else {
                var parent = root
                let moved = nodes[removed].key
                while true {
                    visits += 1
                    let child = moved < nodes[parent].key ? nodes[parent].left : nodes[parent].right
                    if child == last { break }
                    parent = child
                }
                if moved < nodes[parent].key { nodes[parent].left = removed } else { nodes[parent].right = removed }
            }
        }
        nodes.removeLast()
    }

    // MARK: - Treap operations

    private func size(_ node: Int32) -> Int { node == Self.none ? 0 : Int(nodes[node].size) }

    private func sum(_ node: Int32) -> Sum256 { node == Self.none ? .zero : nodes[node].sum }

    /// Sets a node's size and sum from its children's.
    private mutating func update(_ node: Int32) {
        let (left, right) = (nodes[node].left, nodes[node].right)
        nodes[node].size = Int32(1 + size(left) + size(right))
        nodes[node].sum = sum(left) + nodes[node].hash.sum + sum(right)
    }

    /// Sets the sizes and sums of a whole subtree, children first.
    private mutating func summarize(_ node: Int32) {
        guard node != Self.none else { return }
        summarize(nodes[node].left)
        summarize(nodes[node].right)
        update(node)
    }

    /// Splits the subtree at `node` into the items below `key` and the others.
    private mutating func split(_ node: Int32, below key: ReconciliationKey) -> (Int32, Int32) {
        guard node != Self.none else { return (Self.none, Self.none) }
        visits += 1
        if nodes[node].key < key {
            let (below, above) = split(nodes[node].right, below: key)
            nodes[node].right = below
            update(node)
            return (node, above)
        } else {
            let (below, above) = split(nodes[node].left, below: key)
            nodes[node].left = above
            update(node)
            return (below, node)
        }
    }

    /// Joins two subtrees, every key of `low` below every key of `high`.
    private mutating func merge(_ low: Int32, _ high: Int32) -> Int32 {
        if low == Self.none { return high }
        if high == Self.none { return low }
        visits += 1
        if nodes[low].priority > nodes[high].priority {
            nodes[low].right = merge(nodes[low].right, high)
            update(low)
            return low
        } else {
            nodes[high].left = merge(low, nodes[high].left)
            update(high)
            return high
        }
    }

    /// The subtree at `node` without `key`'s node, whose index goes to `removed`.
    private mutating func remove(_ key: ReconciliationKey, from node: Int32, removed: inout Int32) -> Int32 {
        // `ReconciliationSet` removes only keys it found in the tree.
        precondition(node != Self.none, "remove(_:) of a key the tree does not hold")
        visits += 1
        if key == nodes[node].key {
            removed = node
            return merge(nodes[node].left, nodes[node].right)
        }
        if key < nodes[node].key {
            nodes[node].left = remove(key, from: nodes[node].left, removed: &removed)
        } else {
            nodes[node].right = remove(key, from: nodes[node].right, removed: &removed)
        }
        update(node)
        return node
    }
}

extension Array {
    /// Subscripts by a tree's node index.
    fileprivate subscript(index: Int32) -> Element {
        get { self[Int(index)] }
        set { self[Int(index)] = newValue }
    }
}
