import NIOCore
import WeftBytes

/// A transport frame, the plaintext inside one encrypted record (SPEC.md "Frames"):
/// type (u8) | flags (u8, zero in version 1) | payload.
public enum Frame: Hashable, Sendable {
    /// Keepalive probe; the peer answers with `pong` carrying the same value.
    case ping(UInt64)
    case pong(UInt64)
    /// The sender is closing the connection, with a reason.
    case close(CloseCode, String)
    /// The sender saw bad input and is closing the connection.
    case error(ErrorCode, String)
    /// Every record after this one, in this direction, uses the rekeyed cipher.
    case rekey
    /// Application bytes, opaque to the channel (replication messages in later versions).
    case data(ByteBuffer)

    /// Frame type identifiers.
    public enum FrameType: UInt8, Sendable, CaseIterable {
        case ping = 0x01
        case pong = 0x02
        case close = 0x03
        case error = 0x04
        case rekey = 0x05
        case data = 0x10
    }

    public var type: FrameType {
        switch self {
        case .ping: .ping
        case .pong: .pong
        case .close: .close
        case .error: .error
        case .rekey: .rekey
        case .data: .data
        }
    }

    /// Bytes `write(to:)` will produce.
    public var encodedByteCount: Int {
        WireConstants.frameHeaderByteCount + payloadByteCount
    }

    private var payloadByteCount: Int {
        switch self {
        case .ping, .pong: 8
        case .close(_, let text), .error(_, let text): 2 + text.truncatedToUTF8(WireConstants.maxReasonTextByteCount).utf8.count
        case .rekey: 0
        case .data(let bytes): bytes.readableBytes
        }
    }

    /// Writes type, flags and payload (the plaintext of a record).
    @discardableResult
    public func write(to buffer: inout ByteBuffer) -> Int {
        var written = buffer.writeInteger(type.rawValue) + buffer.writeInteger(UInt8(0))
        switch self {
        case .ping(let value), .pong(let value):
            written += buffer.writeInteger(value)
        case .close(let code, let text):
            written += buffer.writeInteger(code.rawValue)
            written += buffer.writeString(text.truncatedToUTF8(WireConstants.maxReasonTextByteCount))
        case .error(let code, let text):
            written += buffer.writeInteger(code.rawValue)
            written += buffer.writeString(text.truncatedToUTF8(WireConstants.maxReasonTextByteCount))
        case .rekey:
            break
        case .data(let bytes):
            written += buffer.writeImmutableBuffer(bytes)
        }
        return written
    }

    /// Parses one whole frame: every readable byte of `buffer` belongs to it. `data` payloads
    /// are slices of `buffer`, not copies.
    public static func read(from buffer: ByteBuffer) throws(WeftWireError) -> Frame {
        var buffer = buffer
        guard let rawType = buffer.readInteger(as: UInt8.self), let flags = buffer.readInteger(as: UInt8.self) else {
            throw .malformed("a frame is shorter than its two-byte header")
        }
        guard let type = FrameType(rawValue: rawType) else { throw .unknownFrameType(rawType) }
        guard flags == 0 else { throw .malformed("flags 0x\(String(flags, radix: 16)) are not defined in version 1") }
        switch type {
        case .ping, .pong:
            guard buffer.readableBytes == 8, let value = buffer.readInteger(as: UInt64.self) else {
                throw .malformed("\(type.withArticle) frame carries 8 bytes, not \(buffer.readableBytes)")
            }
            return type == .ping ? .ping(value) : .pong(value)
        case .close, .error:
            guard let code = buffer.readInteger(as: UInt16.self) else {
                throw .malformed("\(type.withArticle) frame is shorter than its code")
            }
            guard buffer.readableBytes <= WireConstants.maxReasonTextByteCount else {
                throw .malformed("\(type.withArticle) frame's text is longer than \(WireConstants.maxReasonTextByteCount) bytes")
            }
            // The text is the rest of the frame, so it is all there: only its UTF-8 can fail.
            guard let text = try? buffer.readText(length: buffer.readableBytes)
            else { throw .malformed("\(type.withArticle) frame's text is not valid UTF-8") }
            return type == .close ? .close(CloseCode(rawValue: code), text) : .error(ErrorCode(rawValue: code), text)
        case .rekey:
            guard buffer.readableBytes == 0 else { throw .malformed("a rekey frame has no payload") }
            return .rekey
        case .data:
            return .data(buffer)
        }
    }
}

extension Frame.FrameType {
    /// The type's name after its indefinite article ("a ping", "an error"), for error texts.
    var withArticle: String {
        let name = "\(self)"
        return ("aeiou".contains(name.first ?? "x") ? "an " : "a ") + name
    }
}
