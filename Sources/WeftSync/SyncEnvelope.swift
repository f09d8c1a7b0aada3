import NIOCore
import WeftWire

/// One sync message as it travels in a DATA frame's payload (SPEC.md §14.1):
/// `type (u8) | body`, the body running to the end of the payload.
///
/// Sans-I/O: bytes in, a typed envelope out, and back. The body is opaque here; each message
/// type's reader parses it.
public struct SyncEnvelope: Hashable, Sendable {
    /// The type byte.
    public static let typeByteCount = 1
    /// Largest body: a DATA payload less the type byte (1048573 bytes).
    public static let maxBodyByteCount = WireConstants.maxDataPayloadByteCount - typeByteCount

    public var type: SyncMessageType
    public var body: ByteBuffer

    /// - Throws: `SyncMessageError.tooLarge` if `body` does not fit in one DATA frame.
    public init(type: SyncMessageType, body: ByteBuffer) throws(SyncMessageError) {
        guard body.readableBytes <= Self.maxBodyByteCount else { throw .tooLarge(body.readableBytes) }
        self.type = type
        self.body = body
    }

    /// Bytes `write(to:)` produces: the DATA payload's length.
    public var encodedByteCount: Int { Self.typeByteCount + body.readableBytes }

    /// Writes the type byte and the body; returns the byte count.
    @discardableResult
    public func write(to buffer: inout ByteBuffer) -> Int {
        buffer.writeInteger(type.rawValue) + buffer.writeImmutableBuffer(body)
    }

    /// The DATA payload carrying this message.
    public var payload: ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(encodedByteCount)
        write(to: &buffer)
        return buffer
    }

    /// Reads one whole DATA payload: every readable byte belongs to the message. The body is a
    /// slice of `payload`, not a copy.
    public static func read(from payload: ByteBuffer) throws(SyncMessageError) -> SyncEnvelope {
        var payload = payload
        guard let rawType = payload.readInteger(as: UInt8.self) else { throw .empty }
        guard let type = SyncMessageType(rawValue: rawType) else { throw .unknownType(rawType) }
        return try SyncEnvelope(type: type, body: payload)
    }
}
