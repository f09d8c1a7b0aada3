import NIOCore

// Wire primitives. `read` returns nil on short input and leaves the reader index where it was.

extension ByteBuffer {
    /// Reads a length-prefixed UTF-8 string with a one-byte length, at most `limit` bytes.
    mutating func readShortString(limit: Int) throws(WeftWireError) -> String? {
        let save = self
        guard let length = readInteger(as: UInt8.self) else { return nil }
        guard Int(length) <= limit else {
            self = save
            throw .malformed("a string of \(length) bytes is longer than the limit of \(limit)")
        }
        guard let bytes = readBytes(length: Int(length)) else {
            self = save
            return nil
        }
        guard let string = String(validating: bytes, as: UTF8.self) else {
            self = save
            throw .malformed("a string is not valid UTF-8")
        }
        return string
    }

    @discardableResult
    mutating func writeShortString(_ string: String) -> Int {
        let bytes = Array(string.utf8)
        precondition(bytes.count <= Int(UInt8.max), "short strings are at most 255 bytes")
        return writeInteger(UInt8(bytes.count)) + writeBytes(bytes)
    }
}

extension String {
    /// The longest prefix whose UTF-8 form fits in `limit` bytes, cut on a character boundary.
    func truncatedToUTF8(_ limit: Int) -> String {
        if utf8.count <= limit { return self }
        var result = ""
        for character in self {
            if result.utf8.count + character.utf8.count > limit { break }
            result.append(character)
        }
        return result
    }
}
