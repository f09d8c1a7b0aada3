/// How a content is split into chunks: their number and each one's length in bytes (what its
/// descriptor says). The scheduler needs the lengths only to count progress in bytes.
public struct TransferLayout: Sendable, Hashable {
    /// How many chunks: indices 0 ..< `chunkCount`.
    public let chunkCount: Int
    /// The content's length: the sum of the chunks' lengths.
    public let totalByteCount: UInt64
    /// Every chunk but the last is this long (uniform layouts); 0 for an explicit layout.
    private let chunkByteCount: UInt64
    /// Each chunk's length (explicit layouts); empty for a uniform layout.
    private let chunkByteCounts: [UInt32]

    /// `totalByteCount` bytes in chunks of `chunkByteCount` bytes, the last one shorter when
    /// the length is not a multiple (and no chunk at all for an empty content).
    public init(totalByteCount: UInt64, chunkByteCount: UInt32) {
        // The chunk size is 2^chunkLog of a checked descriptor (§17.1: 2^14 to 2^19), never a
        // number off the wire: unreachable from input.
        precondition(chunkByteCount > 0, "chunks are at least one byte long")
        let size = UInt64(chunkByteCount)
        let (whole, rest) = totalByteCount.quotientAndRemainder(dividingBy: size)
        self.chunkCount = Int(clamping: whole + (rest == 0 ? 0 : 1))
        self.totalByteCount = totalByteCount
        self.chunkByteCount = size
        self.chunkByteCounts = []
    }

    /// Chunks of these lengths, in order.
    public init(chunkByteCounts: [UInt32]) {
        self.chunkCount = chunkByteCounts.count
        self.totalByteCount = chunkByteCounts.reduce(0) { $0 + UInt64($1) }
        self.chunkByteCount = 0
        self.chunkByteCounts = chunkByteCounts
    }

    /// The length of chunk `index` (in 0 ..< `chunkCount`).
    public func byteCount(ofChunk index: Int) -> UInt64 {
        // Asked only for chunks the core requested, so below the count (an index a peer sends
        // is checked against the count before the core sees it, §17.6).
        precondition(index >= 0 && index < chunkCount, "chunk \(index) out of 0..<\(chunkCount)")
        if chunkByteCount == 0 { return UInt64(chunkByteCounts[index]) }
        return index == chunkCount - 1 ? totalByteCount - UInt64(index) * chunkByteCount : chunkByteCount
    }

    /// The sum of the lengths of `chunks`.
    public func byteCount(of chunks: TransferChunkSet) -> UInt64 {
        // The core drops a peer's set of another count before it gets here (`record`).
        precondition(chunks.chunkCount == chunkCount, "a set of another content's chunks")
        if chunkByteCount == 0 { return chunks.reduce(0) { $0 + UInt64(chunkByteCounts[$1]) } }
        let last = chunkCount - 1
        let short = chunks.contains(last) ? chunkByteCount - byteCount(ofChunk: last) : 0
        return UInt64(chunks.count) * chunkByteCount - short
    }
}
