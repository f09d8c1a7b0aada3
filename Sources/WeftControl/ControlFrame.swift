import NIOCore

/// One frame on the control socket (SPEC.md §15.2): `u32 length || type u8 || request id u32 ||
/// body`, the length counting everything after itself.
public struct ControlFrame: Hashable, Sendable {
    public var type: UInt8
    /// Chosen by the client; every response and event carries the id of its request. 0 names
    /// the connection itself (an ERROR about a frame whose id could not be read).
    public var requestID: UInt32
    public var body: ByteBuffer

    public init(type: UInt8, requestID: UInt32, body: ByteBuffer = ByteBuffer()) {
        self.type = type
        self.requestID = requestID
        self.body = body
    }

    /// Writes the whole frame, length included. The caller keeps bodies within
    /// `ControlConstants.maxFrameByteCount - headerByteCount` (responses are paged to fit).
    public func write(into buffer: inout ByteBuffer) {
        precondition(body.readableBytes + ControlConstants.headerByteCount <= ControlConstants.maxFrameByteCount,
            "a control frame body over the limit")
        buffer.writeInteger(UInt32(ControlConstants.headerByteCount + body.readableBytes))
        buffer.writeInteger(type)
        buffer.writeInteger(requestID)
        var body = body
        buffer.writeBuffer(&body)
    }

    public var encoded: ByteBuffer {
        var buffer = ByteBuffer()
        write(into: &buffer)
        return buffer
    }

    /// Reads one frame: nil while the buffer holds only part of one (the reader index stays).
    /// Throws for a length under 5 (`malformedRequest`) or over 1 MiB (`frameTooLarge`),
    /// checked before anything is waited for or allocated.
    public static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> ControlFrame? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
        guard length >= ControlConstants.headerByteCount else {
            throw .malformed("a frame length of \(length) is shorter than its 5-byte header")
        }
        guard length <= ControlConstants.maxFrameByteCount else {
            throw ControlFailure(.frameTooLarge,
                "A control frame of \(length) bytes is over the limit of \(ControlConstants.maxFrameByteCount) bytes.")
        }
        guard buffer.readableBytes >= ControlConstants.lengthByteCount + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: ControlConstants.lengthByteCount)
        // The whole frame is readable (checked above), so these reads find their bytes.
        guard let type = buffer.readInteger(as: UInt8.self), let requestID = buffer.readInteger(as: UInt32.self),
            let body = buffer.readSlice(length: Int(length) - ControlConstants.headerByteCount)
        else { throw .malformed("a frame is cut short") }
        return ControlFrame(type: type, requestID: requestID, body: body)
    }
}
