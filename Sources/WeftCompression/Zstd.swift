private import CZstd

/// Compression failures. A struct over a private enum, so new cases don't break users.
public struct WeftCompressionError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case outputLimitExceeded(Int)
        case corrupt(String)
        case truncated
    }

    private let kind: Kind
    private init(_ kind: Kind) { self.kind = kind }

    /// The data would decompress to more than the caller's limit.
    public static func outputLimitExceeded(_ limit: Int) -> Self { Self(.outputLimitExceeded(limit)) }
    /// zstd rejected the input.
    public static func corrupt(_ reason: String) -> Self { Self(.corrupt(reason)) }
    /// The input ended in the middle of a zstd frame.
    public static let truncated = Self(.truncated)

    public var description: String {
        switch kind {
        case .outputLimitExceeded(let limit): "the data decompresses to more than the limit of \(limit) bytes"
        case .corrupt(let reason): "the compressed data is corrupt: \(reason)"
        case .truncated: "the compressed data ends in the middle of a zstd frame"
        }
    }
}

/// A zstd compression context, reused across chunks (one per connection or transfer).
///
/// Not `Sendable`: a context is used by one task at a time.
public final class ZstdCompressor {
    private let context: OpaquePointer
    public let level: Int32

    public init(level: Int32 = 3) {
        guard let context = ZSTD_createCCtx() else { fatalError("ZSTD_createCCtx failed: out of memory") }
        self.context = context
        self.level = level
    }

    deinit { ZSTD_freeCCtx(context) }

    /// Compresses `input` into one zstd frame (with its content size recorded).
    public func compress(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        let bound = ZSTD_compressBound(input.count)
        var output = [UInt8](repeating: 0, count: bound)
        let written = output.withUnsafeMutableBytes { out in
            ZSTD_compressCCtx(context, out.baseAddress, out.count, input.baseAddress, input.count, level)
        }
        // With an output of ZSTD_compressBound bytes compression cannot fail.
        precondition(ZSTD_isError(written) == 0, "zstd: \(String(cString: ZSTD_getErrorName(written)))")
        output.removeLast(bound - written)
        return output
    }

    public func compress(_ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { compress($0) }
    }
}

/// A zstd decompression context that never produces more than a caller-given limit, whatever
/// the frame header claims: output grows in bounded steps and stops at the limit. Nor does it
/// allocate a window larger than the limit needs: a frame whose header asks for more history
/// than the limit's next power of two is refused before its window is allocated (zstd would
/// otherwise allocate up to 128 MiB for a crafted header, whatever the output limit).
public final class ZstdDecompressor {
    private let context: OpaquePointer

    public init() {
        guard let context = ZSTD_createDCtx() else { fatalError("ZSTD_createDCtx failed: out of memory") }
        self.context = context
    }

    deinit { ZSTD_freeDCtx(context) }

    /// Decompresses one or more concatenated zstd frames, at most `limit` bytes of output.
    public func decompress(_ input: UnsafeRawBufferPointer, limit: Int) throws(WeftCompressionError) -> [UInt8] {
        ZSTD_DCtx_reset(context, ZSTD_reset_session_only)
        // No frame within the limit needs a window larger than the limit; the floor is zstd's
        // smallest window (1 KiB).
        let windowLog = Int32(max(10, Int.bitWidth - max(limit - 1, 1).leadingZeroBitCount))
        let set = ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, min(windowLog, Self.maxWindowLog))
        if ZSTD_isError(set) != 0 { throw .corrupt(String(cString: ZSTD_getErrorName(set))) }
        var output: [UInt8] = []
        // Start from the declared size when it is known and within the limit; never trust it further.
        let declared = ZSTD_getFrameContentSize(input.baseAddress, input.count)
        let step = max(ZSTD_DStreamOutSize(), 64)
        output.reserveCapacity(declared < UInt64(limit) ? Int(declared) + 1 : min(limit + 1, step))

        var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        var chunk = [UInt8](repeating: 0, count: step)
        while true {
            let inputBefore = inBuffer.pos
            let (result, produced) = chunk.withUnsafeMutableBytes { out -> (Int, Int) in
                var outBuffer = ZSTD_outBuffer(dst: out.baseAddress, size: out.count, pos: 0)
                let result = ZSTD_decompressStream(context, &outBuffer, &inBuffer)
                return (result, outBuffer.pos)
            }
            if ZSTD_isError(result) != 0 {
                throw .corrupt(String(cString: ZSTD_getErrorName(result)))
            }
            guard output.count + produced <= limit else { throw .outputLimitExceeded(limit) }
            output.append(contentsOf: chunk[0..<produced])
            // 0 means a frame is complete and flushed; more input may hold another frame.
            if result == 0 && inBuffer.pos == inBuffer.size { break }
            // No progress with all input consumed: the frame was cut short.
            if produced == 0 && inBuffer.pos == inputBefore { throw .truncated }
        }
        return output
    }

    /// zstd's own ceiling for a decoder's window (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`, 128 MiB).
    static let maxWindowLog: Int32 = 27

    public func decompress(_ input: [UInt8], limit: Int) throws(WeftCompressionError) -> [UInt8] {
        let result = input.withUnsafeBytes { raw in
            Result { () throws(WeftCompressionError) in try decompress(raw, limit: limit) }
        }
        return try result.get()
    }
}
