/// Big-endian writer for the canonical operation encoding (SPEC.md §12).
struct BinaryWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 128) { bytes.reserveCapacity(capacity) }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: UInt16) { bytes.append(UInt8(value >> 8)); bytes.append(UInt8(value & 0xff)) }
    mutating func u32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8((value >> UInt32(shift)) & 0xff)) }
    }
    mutating func u64(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8((value >> UInt64(shift)) & 0xff)) }
    }
    mutating func raw(_ value: [UInt8]) { bytes += value }
    /// Text with a u16 length.
    mutating func text(_ value: String) {
        let utf8 = Array(value.utf8)
        precondition(utf8.count <= Int(UInt16.max), "text longer than 65535 bytes")
        u16(UInt16(utf8.count))
        bytes += utf8
    }
    /// Bytes with a u32 length.
    mutating func blob(_ value: [UInt8]) {
        u32(UInt32(value.count))
        bytes += value
    }
    mutating func count(_ value: Int) {
        precondition(value <= Int(UInt16.max), "more than 65535 items")
        u16(UInt16(value))
    }
}

/// Reader for the canonical encoding: every read checks the remaining length first and throws
/// `malformed` on short input, so no length is trusted before it is checked.
struct BinaryReader {
    private let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }
    var isAtEnd: Bool { offset == bytes.count }

    mutating func take(_ count: Int) throws(OperationError) -> ArraySlice<UInt8> {
        guard count >= 0, remaining >= count else { throw .malformed("the operation ends early") }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }

    mutating func u8() throws(OperationError) -> UInt8 { try take(1).first! }
    mutating func u16() throws(OperationError) -> UInt16 { try take(2).reduce(0) { $0 << 8 | UInt16($1) } }
    mutating func u32() throws(OperationError) -> UInt32 { try take(4).reduce(0) { $0 << 8 | UInt32($1) } }
    mutating func u64() throws(OperationError) -> UInt64 { try take(8).reduce(0) { $0 << 8 | UInt64($1) } }
    mutating func raw(_ count: Int) throws(OperationError) -> [UInt8] { Array(try take(count)) }

    mutating func text() throws(OperationError) -> String {
        let length = Int(try u16())
        guard let text = String(validating: try take(length), as: UTF8.self) else {
            throw .malformed("a text field is not valid UTF-8")
        }
        return text
    }

    mutating func blob(limit: Int) throws(OperationError) -> [UInt8] {
        let length = Int(try u32())
        guard length <= limit else { throw .malformed("a field of \(length) bytes exceeds \(limit)") }
        return try raw(length)
    }

    mutating func count() throws(OperationError) -> Int { Int(try u16()) }

    func expectEnd() throws(OperationError) {
        guard isAtEnd else { throw .malformed("\(remaining) unexpected bytes after the operation") }
    }
}
