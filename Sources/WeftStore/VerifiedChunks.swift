/// Which chunks of one content are held and verified: a bitset over `0..<chunkCount`, one bit a
/// chunk (at most `ContentStore.maxChunkCount` chunks, 2 MiB of bits).
///
/// Indices outside `0..<chunkCount` are never members: `contains` says false, `insert` and
/// `remove` ignore them.
public struct VerifiedChunks: Hashable, Sendable, CustomStringConvertible {
    /// How many chunks the content has.
    public let chunkCount: Int
    /// How many of them are verified.
    public private(set) var count: Int = 0
    private var words: [UInt64]

    /// No chunk verified, of `chunkCount` (negative counts as none, and more than
    /// `ContentStore.maxChunkCount` as that many).
    public init(chunkCount: Int) {
        self.chunkCount = min(max(chunkCount, 0), ContentStore.maxChunkCount)
        words = Array(repeating: 0, count: (self.chunkCount + 63) / 64)
    }

    /// Whether chunk `index` is verified.
    public func contains(_ index: Int) -> Bool {
        guard index >= 0, index < chunkCount else { return false }
        return words[index >> 6] & (1 << UInt64(index & 63)) != 0
    }

    /// Marks chunk `index` verified; false if it already was (or is out of range).
    @discardableResult
    public mutating func insert(_ index: Int) -> Bool {
        guard index >= 0, index < chunkCount, !contains(index) else { return false }
        words[index >> 6] |= 1 << UInt64(index & 63)
        count += 1
        return true
    }

    /// Marks chunk `index` not verified; false if it was not.
    @discardableResult
    public mutating func remove(_ index: Int) -> Bool {
        guard contains(index) else { return false }
        words[index >> 6] &= ~(1 << UInt64(index & 63))
        count -= 1
        return true
    }

    /// Whether every chunk is verified.
    public var isComplete: Bool { count == chunkCount }

    /// Whether every chunk in `range` is verified (an empty range is).
    public func containsAll(_ range: Range<Int>) -> Bool {
        firstMissing(in: range) == nil
    }

    /// The first index in `range` that is not a verified chunk (indices out of range never
    /// are), skipping whole words of verified chunks; nil if every one is.
    public func firstMissing(in range: Range<Int>) -> Int? {
        guard !range.isEmpty else { return nil }
        guard range.lowerBound >= 0 else { return range.lowerBound }
        var index = range.lowerBound
        let end = min(range.upperBound, chunkCount)
        while index < end {
            if index & 63 == 0, end - index >= 64, words[index >> 6] == .max {
                index += 64
                continue
            }
            if !contains(index) { return index }
            index += 1
        }
        return range.upperBound > chunkCount ? max(chunkCount, range.lowerBound) : nil
    }

    /// The chunks not verified, in order (one `Int` each: for small contents and tests; a
    /// scheduler walks `firstMissing(in:)` instead).
    public var missing: [Int] {
        (0..<chunkCount).filter { !contains($0) }
    }

    /// The chunks verified, in order (one `Int` each, as `missing`).
    public var verified: [Int] {
        (0..<chunkCount).filter { contains($0) }
    }

    /// "17 of 64 chunks verified".
    public var description: String { "\(count) of \(chunkCount) chunks verified" }
}
