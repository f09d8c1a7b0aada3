import NIOCore
import WeftCompression
import WeftWire

// COMPRESSED (SPEC.md §14.11): each direction of a connection is one zstd stream. A message
// worth compressing goes as `0x08 || piece`, the piece decoding to the message's plain
// payload; later pieces refer back to earlier ones, so an identifier, an author's key or a
// conversation named once costs a few bytes the next time. Sans-I/O: payloads in, payloads
// out; the node keeps one encoder and one decoder per connection.

/// The limits both ends of a compressed stream keep (§14.11).
public enum SyncCompression {
    /// How far back a piece may refer: 2^17 bytes (128 KiB). A decoder refuses a frame that
    /// asks for more, so a peer cannot make a node keep more history than this.
    public static let windowLog: Int32 = 17
    /// Shorter plain payloads are sent as they are: a compressed piece has 3 or more bytes of
    /// block header, so below this the stream gains little (a reconciliation in sync is 15
    /// bytes).
    public static let minimumPayloadByteCount = 64
    /// zstd's level for Weft's encoder: the fastest, since each hop of a push compresses.
    public static let level: Int32 = 1

    /// Whether messages of this type always go plain. A HAVE is fingerprints, hashes and
    /// conversations not yet named on the connection: nothing in it repeats, so its piece would
    /// be longer than the message (a 102-byte answer went out as 112 bytes). Whether a piece
    /// shrinks is only known after it has entered the stream, and every piece must then reach
    /// the decoder, so the choice is made by type, before compressing.
    ///
    /// MANIFEST and CHUNK go plain too (§17.8): leaf hashes do not compress, and a chunk's
    /// frame is compressed already when that pays, once, by the node that added the content.
    static func sentPlain(typeByte: UInt8?) -> Bool {
        typeByte == SyncMessageType.have.rawValue || typeByte == SyncMessageType.manifest.rawValue
            || typeByte == SyncMessageType.chunk.rawValue
    }
}

/// The sending end of one direction of a connection: sync message payloads in the order they
/// are written, out as the DATA payloads to write.
///
/// Not `Sendable`: the connection's one writer uses it, in write order.
public final class SyncStreamEncoder {
    private var compressor: ZstdStreamCompressor?

    public init() {}

    /// The DATA payload for `payload` (a plain sync message): COMPRESSED when it is long enough
    /// and its piece is sure to fit a DATA frame, else `payload` itself.
    public func encode(_ payload: ByteBuffer) -> ByteBuffer {
        let count = payload.readableBytes
        // zstd's worst case for n bytes is n + n/256 + 64 or so; a payload that might not fit
        // compressed stays plain, before it enters the stream.
        guard count >= SyncCompression.minimumPayloadByteCount,
            1 + count + count / 128 + 1_024 <= WireConstants.maxDataPayloadByteCount,
            !SyncCompression.sentPlain(typeByte: payload.getInteger(at: payload.readerIndex, as: UInt8.self))
        else { return payload }
        // Made on first use: a connection that only ever says little costs no zstd context.
        let compressor = self.compressor ?? ZstdStreamCompressor(level: SyncCompression.level, windowLog: SyncCompression.windowLog)
        self.compressor = compressor
        let piece = payload.withUnsafeReadableBytes { compressor.compress($0) }
        var out = ByteBuffer()
        out.reserveCapacity(1 + piece.count)
        out.writeInteger(SyncMessageType.compressed.rawValue)
        out.writeBytes(piece)
        return out
    }
}

/// The receiving end of one direction of a connection: DATA payloads in the order they
/// arrived, out as plain sync message payloads for `SyncMessage(payload:)`.
///
/// Not `Sendable`: the connection's one reader uses it, in arrival order. Once it has thrown,
/// the connection must close: later pieces may refer to what was refused.
public final class SyncStreamDecoder {
    private var decompressor: ZstdStreamDecompressor?

    public init() {}

    /// `payload` itself unless it is COMPRESSED; then the message its piece holds, which must
    /// be whole, at most a DATA payload long and of another type.
    public func decode(_ payload: ByteBuffer) throws(SyncMessageError) -> ByteBuffer {
        guard payload.readableBytes > 0, payload.getInteger(at: payload.readerIndex, as: UInt8.self) == SyncMessageType.compressed.rawValue
        else { return payload }
        let decompressor = self.decompressor ?? ZstdStreamDecompressor(maxWindowLog: SyncCompression.windowLog)
        self.decompressor = decompressor
        let plain: [UInt8]
        do {
            plain = try payload.withUnsafeReadableBytes { raw throws(WeftCompressionError) in
                try decompressor.decompress(UnsafeRawBufferPointer(rebasing: raw.dropFirst()), limit: WireConstants.maxDataPayloadByteCount)
            }
        } catch {
            throw .invalidCompression(String(describing: error))
        }
        guard let type = plain.first else { throw .invalidCompression("the piece holds no message") }
        guard type != SyncMessageType.compressed.rawValue else {
            throw .invalidCompression("a COMPRESSED message inside a COMPRESSED message")
        }
        return ByteBuffer(bytes: plain)
    }
}
