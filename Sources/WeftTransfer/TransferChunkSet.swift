/// A set of chunk indices of one content (0 ..< `chunkCount`), as a bitset: the chunks a node
/// holds verified, or the chunks a peer says it holds. Iterates in ascending order.
public struct TransferChunkSet: Sendable, Hashable, Sequence {
    /// How many chunks the content has: the members are below it.
    public let chunkCount: Int
    /// How many chunks are in the set.
    public private(set) var count: Int
    /// Bit `i % 64` of word `i / 64` is chunk `i`. Bits past `chunkCount` are always zero.
    private(set) var words: [UInt64]

    /// The empty set of a content of `chunkCount` chunks.
    public init(chunkCount: Int) {
        // Counts come from descriptors a reader checked (§17.1: 1 to 16,384), or from a peer's
        // message only after it was checked against one: unreachable from input.
        precondition(chunkCount >= 0, "a content has no negative number of chunks")
        self.chunkCount = chunkCount
        self.count = 0
        self.words = Array(repeating: 0, count: (chunkCount + 63) / 64)
    }

    /// The set of `chunks`, each in 0 ..< `chunkCount`.
    public init(chunkCount: Int, chunks: some Sequence<Int>) {
        self.init(chunkCount: chunkCount)
        for chunk in chunks { insert(chunk) }
    }

    /// Every chunk of a content of `chunkCount` chunks.
    public static func full(chunkCount: Int) -> TransferChunkSet {
        var set = TransferChunkSet(chunkCount: chunkCount)
        for index in set.words.indices { set.words[index] = set.validBits(index) }
        set.count = chunkCount
        return set
    }

    public var isEmpty: Bool { count == 0 }
    /// Whether every chunk of the content is in the set.
    public var isFull: Bool { count == chunkCount }

    /// Whether `chunk` is in the set; false for an index out of range.
    public func contains(_ chunk: Int) -> Bool {
        guard chunk >= 0, chunk < chunkCount else { return false }
        return words[chunk >> 6] & (1 << UInt64(chunk & 63)) != 0
    }

    /// Adds `chunk` (in 0 ..< `chunkCount`); true if it was not in the set.
    @discardableResult
    public mutating func insert(_ chunk: Int) -> Bool {
        // Callers check indices from the wire against the count first (HOLDINGS, §17.8).
        precondition(chunk >= 0 && chunk < chunkCount, "chunk \(chunk) out of 0..<\(chunkCount)")
        let bit: UInt64 = 1 << UInt64(chunk & 63)
        guard words[chunk >> 6] & bit == 0 else { return false }
        words[chunk >> 6] |= bit
        count += 1
        return true
    }

    /// Removes `chunk`; true if it was in the set.
    @discardableResult
    public mutating func remove(_ chunk: Int) -> Bool {
        guard contains(chunk) else { return false }
        words[chunk >> 6] &= ~(1 << UInt64(chunk & 63))
        count -= 1
        return true
    }

    // MARK: - Words

    /// Word `index` of the bitset.
    func word(_ index: Int) -> UInt64 { words[index] }

    /// The bits of word `index` that name chunks of the content.
    func validBits(_ index: Int) -> UInt64 {
        let remainder = chunkCount - index * 64
        return remainder >= 64 ? ~0 : (1 << UInt64(remainder)) - 1
    }

    // MARK: - Sequence

    public func makeIterator() -> Iterator { Iterator(words: words) }

    public var underestimatedCount: Int { count }

    /// The chunks of the set in ascending order.
    public struct Iterator: IteratorProtocol {
        private let words: [UInt64]
        private var index = 0
        private var current: UInt64

        init(words: [UInt64]) {
            self.words = words
            self.current = words.first ?? 0
        }

        public mutating func next() -> Int? {
            while current == 0 {
                index += 1
                guard index < words.count else { return nil }
                current = words[index]
            }
            let bit = current.trailingZeroBitCount
            current &= current - 1
            return index * 64 + bit
        }
    }
}

/// Which chunks of a content a peer says it holds.
public enum TransferHoldings: Sendable, Hashable {
    /// Every chunk (the peer holds the whole content, verified).
    case all
    /// These chunks (of the content's count).
    case chunks(TransferChunkSet)

    public func contains(_ chunk: Int) -> Bool {
        switch self {
        case .all: true
        case .chunks(let set): set.contains(chunk)
        }
    }

    /// Word `index` of the held chunks, as a bitset of the content's chunks (bits past the
    /// content's count unspecified: callers mask them).
    func word(_ index: Int) -> UInt64 {
        switch self {
        case .all: ~0
        case .chunks(let set): set.word(index)
        }
    }

    /// The same, without `chunk`.
    func removing(_ chunk: Int, chunkCount: Int) -> TransferHoldings {
        var set: TransferChunkSet
        switch self {
        case .all: set = .full(chunkCount: chunkCount)
        case .chunks(let chunks): set = chunks
        }
        set.remove(chunk)
        return .chunks(set)
    }
}
