private import CZstd

// One zstd frame that never ends, cut into flushed pieces: each `compress` call is a flush
// point, so the receiver can decode everything sent so far, while later pieces still refer
// back to earlier ones (a connection's messages repeat identifiers, keys and structure).
// The window is bounded, so each side's memory is too.

/// The compressing end of a zstd stream whose pieces are each decodable once received.
///
/// Not `Sendable`: one writer uses it, in the order its pieces travel.
public final class ZstdStreamCompressor {
    private let context: OpaquePointer

    /// - Parameters:
    ///   - level: zstd's compression level.
    ///   - windowLog: how far back (2^windowLog bytes) a piece may refer; the decompressor
    ///     must allow at least as much.
    public init(level: Int32 = 1, windowLog: Int32) {
        guard let context = ZSTD_createCCtx() else { fatalError("ZSTD_createCCtx failed: out of memory") }
        self.context = context
        Self.check(ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level))
        Self.check(ZSTD_CCtx_setParameter(context, ZSTD_c_windowLog, windowLog))
        // The frame never ends, so it can carry neither its size nor a checksum.
        Self.check(ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 0))
        Self.check(ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 0))
    }

    deinit { ZSTD_freeCCtx(context) }

    /// Compresses `input` as the stream's next piece (the first piece starts with the frame
    /// header) and flushes it.
    public func compress(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: ZSTD_compressBound(input.count) + 32)
        var written = 0
        var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        while true {
            let remaining = output.withUnsafeMutableBytes { out -> Int in
                var outBuffer = ZSTD_outBuffer(dst: out.baseAddress, size: out.count, pos: written)
                let remaining = ZSTD_compressStream2(context, &outBuffer, &inBuffer, ZSTD_e_flush)
                written = outBuffer.pos
                return remaining
            }
            Self.check(remaining)
            if remaining == 0 { break }
            output += [UInt8](repeating: 0, count: max(remaining, 64))  // more to flush: room for it
        }
        output.removeLast(output.count - written)
        return output
    }

    public func compress(_ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { compress($0) }
    }

    /// zstd refuses only parameters out of range or exhausted memory: bugs here, not input.
    private static func check(_ result: Int) {
        precondition(ZSTD_isError(result) == 0, "zstd: \(String(cString: ZSTD_getErrorName(result)))")
    }
}

/// The decompressing end of a `ZstdStreamCompressor`'s stream: each piece must decode whole,
/// to at most a caller-given number of bytes, within a bounded window.
///
/// Not `Sendable`: one reader uses it, in the order the pieces arrived. After it throws, the
/// stream is broken for good (later pieces may refer to what was lost).
public final class ZstdStreamDecompressor {
    private let context: OpaquePointer
    private var isBroken = false

    /// - Parameter maxWindowLog: the largest window a frame may ask for; a larger one is
    ///   refused as corrupt, so a peer cannot make this side hold more history.
    public init(maxWindowLog: Int32) {
        guard let context = ZSTD_createDCtx() else { fatalError("ZSTD_createDCtx failed: out of memory") }
        self.context = context
        let result = ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, maxWindowLog)
        precondition(ZSTD_isError(result) == 0, "zstd: \(String(cString: ZSTD_getErrorName(result)))")
    }

    deinit { ZSTD_freeDCtx(context) }

    /// Decodes the stream's next piece, which must yield at most `limit` bytes and end at a
    /// flush point (everything it holds comes out, nothing waits for a later piece).
    public func decompress(_ input: UnsafeRawBufferPointer, limit: Int) throws(WeftCompressionError) -> [UInt8] {
        guard !isBroken else { throw .corrupt("an earlier piece of the stream was refused") }
        do {
            return try decode(input, limit: limit)
        } catch {
            isBroken = true
            throw error
        }
    }

    public func decompress(_ input: [UInt8], limit: Int) throws(WeftCompressionError) -> [UInt8] {
        let result = input.withUnsafeBytes { raw in
            Result { () throws(WeftCompressionError) in try decompress(raw, limit: limit) }
        }
        return try result.get()
    }

    private func decode(_ input: UnsafeRawBufferPointer, limit: Int) throws(WeftCompressionError) -> [UInt8] {
        // One byte past the limit tells "exactly the limit" from "more".
        var output = [UInt8](repeating: 0, count: min(limit + 1, max(4 * input.count + 64, 256)))
        var produced = 0
        var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        while true {
            let result = output.withUnsafeMutableBytes { out -> Int in
                var outBuffer = ZSTD_outBuffer(dst: out.baseAddress, size: out.count, pos: produced)
                let result = ZSTD_decompressStream(context, &outBuffer, &inBuffer)
                produced = outBuffer.pos
                return result
            }
            if ZSTD_isError(result) != 0 { throw .corrupt(String(cString: ZSTD_getErrorName(result))) }
            guard produced <= limit else { throw .outputLimitExceeded(limit) }
            if produced < output.count {
                // Output to spare: zstd stopped for want of input. A piece that ends at a flush
                // point has then given everything; one that does not leaves a block unfinished.
                guard inBuffer.pos == inBuffer.size else { continue }
                if result == 0 || Self.endsAtBlockBoundary(result) { break }
                throw .truncated
            }
            output += [UInt8](repeating: 0, count: min(limit + 1, 2 * output.count) - output.count)
        }
        output.removeLast(output.count - produced)
        return output
    }

    /// After a flushed piece, zstd waits for the next block's 3-byte header: its hint is then
    /// exactly 3 (`ZSTD_blockHeaderSize`); inside a block it asks for the block's rest.
    private static func endsAtBlockBoundary(_ hint: Int) -> Bool { hint == 3 }
}
