import NIOCore

/// The 8 bytes each side sends first, before the handshake (SPEC.md "Preamble"):
/// `"WEFT"` | protocol version (u16) | reserved (u16, zero).
///
/// Both preambles, initiator's first, are the Noise prologue, so a tampered preamble fails the
/// handshake.
public struct Preamble: Hashable, Sendable {
    public var version: UInt16
    public var reserved: UInt16

    public init(version: UInt16 = WireConstants.protocolVersion, reserved: UInt16 = 0) {
        self.version = version
        self.reserved = reserved
    }

    @discardableResult
    public func write(to buffer: inout ByteBuffer) -> Int {
        buffer.writeBytes(WireConstants.magic) + buffer.writeInteger(version) + buffer.writeInteger(reserved)
    }

    public var bytes: [UInt8] {
        var buffer = ByteBuffer()
        write(to: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// Nil if fewer than 8 bytes are available; throws if the magic is wrong.
    public static func read(from buffer: inout ByteBuffer) throws(WeftWireError) -> Preamble? {
        guard let bytes = buffer.getBytes(at: buffer.readerIndex, length: WireConstants.preambleByteCount) else {
            return nil
        }
        guard Array(bytes[0..<4]) == WireConstants.magic else {
            throw .malformed("the connection does not start with the Weft magic \"WEFT\"")
        }
        buffer.moveReaderIndex(forwardBy: WireConstants.preambleByteCount)
        return Preamble(
            version: UInt16(bytes[4]) << 8 | UInt16(bytes[5]),
            reserved: UInt16(bytes[6]) << 8 | UInt16(bytes[7]))
    }
}
