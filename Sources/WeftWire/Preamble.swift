import NIOCore
import WeftBytes

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

    /// Nil if fewer than 8 bytes are available; throws if the magic is wrong. Either way the
    /// reader index stays where it was.
    public static func read(from buffer: inout ByteBuffer) throws(WeftWireError) -> Preamble? {
        try buffer.rewindingReaderIndexOnNil { buffer throws(WeftWireError) in
            guard let magic = buffer.readBytes(length: WireConstants.magic.count),
                let version = buffer.readInteger(as: UInt16.self),
                let reserved = buffer.readInteger(as: UInt16.self)
            else { return nil }
            guard magic == WireConstants.magic else {
                throw .malformed("the connection does not start with the Weft magic \"WEFT\"")
            }
            return Preamble(version: version, reserved: reserved)
        }
    }
}
