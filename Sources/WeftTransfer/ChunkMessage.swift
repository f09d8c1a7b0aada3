import NIOCore
import WeftModel

/// One chunk on its way (SPEC.md §17.6): `root (32) || index u32 || chunk frame`.
public struct ChunkMessage: Hashable, Sendable {
    /// Length of the fields before the frame.
    public static let headerByteCount = ContentRoot.byteCount + 4
    /// The shortest body: header and flags byte.
    public static let minimumByteCount = headerByteCount + ChunkFrame.flagsByteCount

    /// The content the chunk belongs to.
    public var root: ContentRoot
    /// The chunk's index in it, from 0.
    public var index: UInt32
    /// `flags u8 || payload` (§17.5), checked only by `ChunkFrameDecoder`.
    public var frame: ByteBuffer

    public init(root: ContentRoot, index: UInt32, frame: ByteBuffer) {
        self.root = root
        self.index = index
        self.frame = frame
    }

    /// Reads a chunk message that is all of `wire`; the frame is a slice of it (no copy).
    /// Throws `.malformedChunkMessage` if it is shorter than 37 bytes.
    public init(wire: ByteBuffer) throws(ContentError) {
        guard wire.readableBytes >= Self.minimumByteCount,
            let rootBytes = wire.getBytes(at: wire.readerIndex, length: ContentRoot.byteCount),
            let root = ContentRoot(bytes: rootBytes),
            let index = wire.getInteger(at: wire.readerIndex + ContentRoot.byteCount, as: UInt32.self),
            let frame = wire.getSlice(
                at: wire.readerIndex + Self.headerByteCount, length: wire.readableBytes - Self.headerByteCount)
        else {
            throw ContentError(
                .malformedChunkMessage,
                "a chunk message is at least \(Self.minimumByteCount) bytes, not \(wire.readableBytes)"
            )
        }
        self.init(root: root, index: index, frame: frame)
    }

    /// Writes the message; returns its byte count.
    @discardableResult
    public func write(to buffer: inout ByteBuffer) -> Int {
        Self.writeHeader(root: root, index: index, to: &buffer) + buffer.writeImmutableBuffer(frame)
    }

    /// Writes the header (root and index) of a chunk message whose frame the caller writes
    /// right after it.
    @discardableResult
    public static func writeHeader(root: ContentRoot, index: UInt32, to buffer: inout ByteBuffer) -> Int {
        buffer.writeBytes(root.bytes) + buffer.writeInteger(index)
    }

    /// The message in a buffer of its own.
    public var wire: ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(Self.headerByteCount + frame.readableBytes)
        write(to: &buffer)
        return buffer
    }
}
