import NIOCore
import WeftBytes
import WeftCrypto
import WeftModel

// The control protocol's fields (SPEC.md §15.3): text is u16 length || UTF-8, blob u32 length ||
// bytes, a list u16 count || items, a page u32 count || items. Reads throw on short or
// malformed input: a control frame arrives whole, so a missing byte is malformed.

extension ByteBuffer {
    mutating func readU8(_ what: String) throws(ControlFailure) -> UInt8 {
        guard let value = readInteger(as: UInt8.self) else { throw .malformed("\(what) is missing") }
        return value
    }

    mutating func readU16(_ what: String) throws(ControlFailure) -> UInt16 {
        guard let value = readInteger(as: UInt16.self) else { throw .malformed("\(what) is missing") }
        return value
    }

    mutating func readU32(_ what: String) throws(ControlFailure) -> UInt32 {
        guard let value = readInteger(as: UInt32.self) else { throw .malformed("\(what) is missing") }
        return value
    }

    mutating func readU64(_ what: String) throws(ControlFailure) -> UInt64 {
        guard let value = readInteger(as: UInt64.self) else { throw .malformed("\(what) is missing") }
        return value
    }

    /// A flag byte: 0 or 1, anything else is malformed.
    mutating func readBool(_ what: String) throws(ControlFailure) -> Bool {
        switch try readU8(what) {
        case 0: return false
        case 1: return true
        case let other: throw .malformed("\(what) is \(other), not 0 or 1")
        }
    }

    /// Flags where only `allowed` bits may be set.
    mutating func readFlags(_ what: String, allowed: UInt8) throws(ControlFailure) -> UInt8 {
        let flags = try readU8(what)
        guard flags & ~allowed == 0 else { throw .malformed("\(what) has unassigned bits set") }
        return flags
    }

    mutating func readControlText(_ what: String, limit: Int = Int(UInt16.max)) throws(ControlFailure) -> String {
        let text: String?
        do {
            text = try readLengthPrefixedText(UInt16.self, limit: limit)
        } catch {
            throw .malformed("\(what): \(error)")
        }
        guard let text else { throw .malformed("\(what) is cut short") }
        return text
    }

    mutating func readBlob(_ what: String, limit: Int) throws(ControlFailure) -> [UInt8] {
        let bytes: [UInt8]?
        do {
            bytes = try readLengthPrefixedBytes(UInt32.self, limit: limit)
        } catch {
            throw .malformed("\(what): \(error)")
        }
        guard let bytes else { throw .malformed("\(what) is cut short") }
        return bytes
    }

    mutating func readUser(_ what: String) throws(ControlFailure) -> UserID {
        guard let bytes = readBytes(length: PublicIdentity.byteCount) else { throw .malformed("\(what) is cut short") }
        // Participant keys are taken as they are (SPEC.md §12.1): only signing checks them.
        return PublicIdentity(unvalidatedBytes: bytes)
    }

    mutating func readConversation(_ what: String) throws(ControlFailure) -> ConversationID {
        guard let bytes = readBytes(length: ConversationID.byteCount), let id = ConversationID(bytes: bytes) else {
            throw .malformed("\(what) is cut short")
        }
        return id
    }

    mutating func readMessageID(_ what: String) throws(ControlFailure) -> OperationID {
        guard let bytes = readBytes(length: OperationID.byteCount), let id = OperationID(bytes: bytes) else {
            throw .malformed("\(what) is cut short")
        }
        return id
    }

    /// A u16-counted list.
    mutating func readList<T>(_ what: String, _ item: (inout ByteBuffer) throws(ControlFailure) -> T) throws(ControlFailure) -> [T] {
        let count = try readU16("\(what) count")
        var items: [T] = []
        for _ in 0..<count { items.append(try item(&self)) }
        return items
    }

    /// A u32-counted page or result list; the count is checked against the bytes left (each
    /// item takes at least `minimumItemBytes`) before anything is reserved.
    mutating func readPage<T>(
        _ what: String, minimumItemBytes: Int, _ item: (inout ByteBuffer) throws(ControlFailure) -> T
    ) throws(ControlFailure) -> [T] {
        let count = try readU32("\(what) count")
        guard Int(count) * minimumItemBytes <= readableBytes else { throw .malformed("\(what) count \(count) is more than the frame holds") }
        var items: [T] = []
        items.reserveCapacity(Int(count))
        for _ in 0..<count { items.append(try item(&self)) }
        return items
    }

    mutating func expectEnd(_ what: String) throws(ControlFailure) {
        guard readableBytes == 0 else { throw .malformed("\(readableBytes) bytes left over after \(what)") }
    }

    // MARK: - Writing

    mutating func writeBool(_ value: Bool) { writeInteger(UInt8(value ? 1 : 0)) }

    /// Text of at most `limit` bytes; longer text of our own is cut at a character boundary.
    mutating func writeControlText(_ text: String, limit: Int = Int(UInt16.max)) {
        var bytes = Array(text.utf8)
        if bytes.count > limit {
            var cut = String(decoding: bytes.prefix(limit), as: UTF8.self)
            while cut.utf8.count > limit { cut.removeLast() }
            bytes = Array(cut.utf8)
        }
        writeInteger(UInt16(bytes.count))
        writeBytes(bytes)
    }

    mutating func writeBlob(_ bytes: [UInt8]) {
        writeInteger(UInt32(bytes.count))
        writeBytes(bytes)
    }

    mutating func writeList<T>(_ items: [T], _ item: (inout ByteBuffer, T) -> Void) {
        precondition(items.count <= Int(UInt16.max), "a control list holds at most 65535 items")
        writeInteger(UInt16(items.count))
        for value in items { item(&self, value) }
    }

    mutating func writePage<T>(_ items: [T], _ item: (inout ByteBuffer, T) -> Void) {
        writeInteger(UInt32(items.count))
        for value in items { item(&self, value) }
    }
}
