import NIOCore

// Reading Weft's fields (SPEC.md §1: integers big-endian, text UTF-8). Fixed-width integers
// are NIO's `readInteger(as:)` and fixed-length byte strings its `readBytes(length:)`, which
// are big-endian and already follow the rules below; this file adds length-prefixed fields.
//
// Every `read` returns nil when the buffer holds too few bytes and then leaves the reader index
// where it was; a `throw` means the bytes are there but malformed, and also leaves it alone.
// A length prefix is checked against the field's limit before anything is sliced or copied.

extension ByteBuffer {
    /// Runs `body` on this buffer; if it returns nil or throws, the reader index goes back to
    /// where it was, so a composite read consumes all of its fields or none.
    @inlinable
    package mutating func rewindingReaderIndexOnNil<Value, Failure: Error>(
        _ body: (inout ByteBuffer) throws(Failure) -> Value?
    ) throws(Failure) -> Value? {
        let start = readerIndex
        do {
            guard let value = try body(&self) else {
                moveReaderIndex(to: start)
                return nil
            }
            return value
        } catch {
            moveReaderIndex(to: start)
            throw error
        }
    }

    /// Reads a field of `Length` (u8, u16 or u32) followed by that many bytes, as a slice of
    /// this buffer (no copy). Throws `.tooLong` if the prefix exceeds `limit`.
    @inlinable
    package mutating func readLengthPrefixedSlice<Length: FixedWidthInteger & UnsignedInteger>(
        _: Length.Type, limit: Int
    ) throws(ByteFieldError) -> ByteBuffer? {
        guard let length = getPrefixedLength(Length.self, limit: limit),
            let slice = getSlice(at: readerIndex + MemoryLayout<Length>.size, length: try length.get())
        else { return nil }
        moveReaderIndex(forwardBy: MemoryLayout<Length>.size + slice.readableBytes)
        return slice
    }

    /// Reads a field of `Length` followed by that many bytes, as an array.
    @inlinable
    package mutating func readLengthPrefixedBytes<Length: FixedWidthInteger & UnsignedInteger>(
        _: Length.Type, limit: Int
    ) throws(ByteFieldError) -> [UInt8]? {
        guard let length = getPrefixedLength(Length.self, limit: limit),
            let bytes = getBytes(at: readerIndex + MemoryLayout<Length>.size, length: try length.get())
        else { return nil }
        moveReaderIndex(forwardBy: MemoryLayout<Length>.size + bytes.count)
        return bytes
    }

    /// Reads a field of `Length` followed by that many bytes of UTF-8 text. Throws `.tooLong`
    /// if the prefix exceeds `limit` (in bytes) and `.invalidUTF8` if the bytes are not text.
    @inlinable
    package mutating func readLengthPrefixedText<Length: FixedWidthInteger & UnsignedInteger>(
        _: Length.Type, limit: Int
    ) throws(ByteFieldError) -> String? {
        guard let length = getPrefixedLength(Length.self, limit: limit) else { return nil }
        let byteCount = try length.get()
        guard let text = try getText(at: readerIndex + MemoryLayout<Length>.size, length: byteCount) else { return nil }
        moveReaderIndex(forwardBy: MemoryLayout<Length>.size + byteCount)
        return text
    }

    /// Reads `length` bytes of UTF-8 text; throws `.invalidUTF8` if they are not text.
    @inlinable
    package mutating func readText(length: Int) throws(ByteFieldError) -> String? {
        guard let text = try getText(at: readerIndex, length: length) else { return nil }
        moveReaderIndex(forwardBy: length)
        return text
    }

    /// Every readable byte, copied into an array (one `memcpy`); the reader index stays.
    @inlinable
    package var readableBytesArray: [UInt8] {
        withUnsafeReadableBytes { $0.withMemoryRebound(to: UInt8.self) { Array($0) } }
    }

    // MARK: - Building blocks

    /// The length prefix at the reader index: nil if it is not all there, a failure if it
    /// exceeds `limit`.
    @inlinable
    package func getPrefixedLength<Length: FixedWidthInteger & UnsignedInteger>(
        _: Length.Type, limit: Int
    ) -> Result<Int, ByteFieldError>? {
        guard let prefix = getInteger(at: readerIndex, as: Length.self) else { return nil }
        // A u32 or u64 prefix may not fit an Int on a 32-bit machine: then it is over any limit.
        guard let length = Int(exactly: prefix), length <= limit else {
            return .failure(.tooLong(length: Int(clamping: prefix), limit: limit))
        }
        return .success(length)
    }

    /// `length` bytes of UTF-8 text at `index`, validated in place (no intermediate copy).
    @inlinable
    package func getText(at index: Int, length: Int) throws(ByteFieldError) -> String? {
        precondition(length >= 0, "a text length is never negative")
        guard index >= readerIndex, index <= writerIndex - length else { return nil }
        let text = withUnsafeReadableBytes { readable in
            let offset = index - readerIndex
            // Typed as UInt8, the bytes take the standard library's fast validation path.
            return UnsafeRawBufferPointer(rebasing: readable[offset..<(offset + length)]).withMemoryRebound(to: UInt8.self) {
                String(validating: $0, as: UTF8.self)
            }
        }
        guard let text else { throw .invalidUTF8 }
        return text
    }
}
