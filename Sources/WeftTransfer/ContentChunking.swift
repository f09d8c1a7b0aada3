import WeftModel

/// The chunking rule (SPEC.md §17.2): the chunk size a sender gives content of a given size.
///
/// Small content gets few chunks (at most 16, of at least 16 KiB); content over 4 MiB gets
/// 512 KiB chunks, the largest a chunk message holds in one frame: the per-chunk costs (a
/// request, a message, a verification job, a journal record) are paid half as often as with
/// 256 KiB chunks, which measured 20–50 % more throughput on loopback.
public enum ContentChunking {
    /// Content up to 16 × 512 KiB (8 MiB) is cut into at most this many chunks.
    public static let smallContentChunkCount = 16
    /// The chunk size of large content: 2^19 (512 KiB).
    public static let largeChunkLog: UInt8 = 19

    /// chunkLog = min(19, max(14, ⌈log2 byteCount⌉ − 4)) (then one more while the content
    /// would have more than `ContentDescriptor.maxChunkCount` chunks, which content of at most
    /// `ContentDescriptor.maxByteCount` never has).
    ///
    /// Throws `.unsupportedSize` for 0 bytes and for more than `ContentDescriptor.maxByteCount`.
    public static func chunkLog(forByteCount byteCount: UInt64) throws(ContentError) -> UInt8 {
        guard byteCount >= 1, byteCount <= ContentDescriptor.maxByteCount else {
            throw ContentError(
                .unsupportedSize,
                "content of \(byteCount) bytes cannot be rich content (1 to \(ContentDescriptor.maxByteCount) bytes)"
            )
        }
        // ⌈log2 n⌉: 0 for 1, else the bit width of n - 1.
        let ceilingLog2 = byteCount == 1 ? 0 : UInt64.bitWidth - (byteCount - 1).leadingZeroBitCount
        var chunkLog = UInt8(min(Int(largeChunkLog), max(Int(ContentDescriptor.chunkLogRange.lowerBound), ceilingLog2 - 4)))
        while chunkCount(byteCount, chunkLog) > UInt64(ContentDescriptor.maxChunkCount) {
            chunkLog += 1
        }
        // byteCount ≤ maxByteCount: the loop stops at the range's upper bound at the latest.
        assert(ContentDescriptor.chunkLogRange.contains(chunkLog))
        return chunkLog
    }

    private static func chunkCount(_ byteCount: UInt64, _ chunkLog: UInt8) -> UInt64 {
        (byteCount >> UInt64(chunkLog)) + (byteCount & ((1 << UInt64(chunkLog)) - 1) == 0 ? 0 : 1)
    }
}
