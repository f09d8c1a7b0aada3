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
        return [UInt8](unsafeUninitializedCapacity: bound) { out, count in
            let written = ZSTD_compressCCtx(context, out.baseAddress, bound, input.baseAddress, input.count, level)
            // With an output of ZSTD_compressBound bytes compression cannot fail, whatever the
            // input (only a node's own content is compressed here): a failure is a bug.
            precondition(ZSTD_isError(written) == 0, "zstd: \(String(cString: ZSTD_getErrorName(written)))")
            count = written
        }
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
        var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        var output: [UInt8] = []
        // Straight into the output when the header declares a size within the limit (Weft's
        // encoder always records it): one spare byte shows a frame that makes more than it
        // declared, and then the steps below go on from where this stopped. Never trusted further.
        let declared = ZSTD_getFrameContentSize(input.baseAddress, input.count)
        if declared < UInt64(limit) {
            let capacity = Int(declared) + 1
            var outcome: Result<Step, WeftCompressionError> = .success(.outputFull)
            output = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
                var outBuffer = ZSTD_outBuffer(dst: buffer.baseAddress, size: capacity, pos: 0)
                outcome = decompress(&inBuffer, into: &outBuffer)
                count = outBuffer.pos
            }
            switch try outcome.get() {
            case .finished: return output
            case .stalled: throw .truncated
            case .outputFull: break
            }
        }
        let stepByteCount = max(ZSTD_DStreamOutSize(), 64)
        output.reserveCapacity(min(limit + 1, output.count + stepByteCount))
        var chunk = [UInt8](repeating: 0, count: stepByteCount)
        while true {
            let (outcome, produced) = chunk.withUnsafeMutableBytes { out -> (Result<Step, WeftCompressionError>, Int) in
                var outBuffer = ZSTD_outBuffer(dst: out.baseAddress, size: out.count, pos: 0)
                return (decompress(&inBuffer, into: &outBuffer), outBuffer.pos)
            }
            let step = try outcome.get()
            // Before `.stalled`: a frame cut short after more than the limit is over the limit.
            guard output.count + produced <= limit else { throw .outputLimitExceeded(limit) }
            output.append(contentsOf: chunk[0..<produced])
            switch step {
            case .finished: return output
            case .stalled: throw .truncated
            case .outputFull: continue
            }
        }
    }

    /// How a run of `decompress(_:into:)` ended.
    private enum Step {
        /// The input is used up and every frame in it complete.
        case finished
        case outputFull
        /// No progress with room left: the input is used up inside a frame (cut short).
        case stalled
    }

    /// Decompresses until the input is used up with every frame complete, the output is full,
    /// or nothing moves; fails on a corrupt frame.
    private func decompress(_ input: inout ZSTD_inBuffer, into output: inout ZSTD_outBuffer) -> Result<Step, WeftCompressionError> {
        while true {
            let before = (input.pos, output.pos)
            let result = ZSTD_decompressStream(context, &output, &input)
            if ZSTD_isError(result) != 0 { return .failure(.corrupt(String(cString: ZSTD_getErrorName(result)))) }
            // 0 means a frame is complete and flushed; more input may hold another frame.
            if result == 0 && input.pos == input.size { return .success(.finished) }
            if output.pos == output.size { return .success(.outputFull) }
            if (input.pos, output.pos) == before { return .success(.stalled) }
        }
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
