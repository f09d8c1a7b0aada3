import NIOCore

// Writing Weft's fields. Fixed-width integers are NIO's `writeInteger(_:)` (big-endian) and
// raw bytes its `writeBytes(_:)`; this file adds the length-prefixed fields. Every `write`
// returns the number of bytes it wrote.
//
// A value too long for its prefix is a bug in the caller, which must check its format's limit
// first and refuse the value with a clear error (a peer's input never gets this far unchecked).

extension ByteBuffer {
    /// Writes `bytes` after their count as a `Length` (u8, u16 or u32).
    @inlinable
    @discardableResult
    package mutating func writeLengthPrefixedBytes<Length: FixedWidthInteger & UnsignedInteger>(
        _ bytes: some Collection<UInt8>, _: Length.Type
    ) -> Int {
        guard let length = Length(exactly: bytes.count) else {
            preconditionFailure("\(bytes.count) bytes do not fit a \(Length.bitWidth)-bit length prefix")
        }
        return writeInteger(length) + writeBytes(bytes)
    }

    /// Writes the UTF-8 bytes of `text` after their count as a `Length`.
    @inlinable
    @discardableResult
    package mutating func writeLengthPrefixedText<Length: FixedWidthInteger & UnsignedInteger>(
        _ text: String, _: Length.Type
    ) -> Int {
        let byteCount = text.utf8.count
        guard let length = Length(exactly: byteCount) else {
            preconditionFailure("text of \(byteCount) bytes does not fit a \(Length.bitWidth)-bit length prefix")
        }
        return writeInteger(length) + writeString(text)
    }

    /// Writes whatever `body` writes, after its byte count as a `Length`: a nested field
    /// (such as an operation's body blob) written in place, without an intermediate buffer.
    @inlinable
    @discardableResult
    package mutating func writeLengthPrefixed<Length: FixedWidthInteger & UnsignedInteger>(
        _: Length.Type, _ body: (inout ByteBuffer) -> Int
    ) -> Int {
        let prefixIndex = writerIndex
        writeInteger(Length.zero)
        let written = body(&self)
        assert(written == writerIndex - prefixIndex - MemoryLayout<Length>.size, "body miscounted its bytes")
        guard let length = Length(exactly: written) else {
            preconditionFailure("\(written) bytes do not fit a \(Length.bitWidth)-bit length prefix")
        }
        setInteger(length, at: prefixIndex)
        return MemoryLayout<Length>.size + written
    }
}
