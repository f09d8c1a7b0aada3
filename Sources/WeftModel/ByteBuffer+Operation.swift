import NIOCore
import WeftBytes
import WeftCrypto

// The operation encoding's fields (SPEC.md §12.1) on WeftBytes' primitives: integers
// big-endian, *text* is `u16 length || UTF-8`, *blob* is `u32 length || bytes`, a *list* is
// `u16 count || items`.
//
// An operation is always decoded whole, so here a short read is not "wait for more bytes" but
// a malformed operation, and every failure is an `OperationError`.

extension ByteBuffer {
    // MARK: - Reading

    mutating func readOperationInteger<Integer: FixedWidthInteger>(_: Integer.Type) throws(OperationError) -> Integer {
        guard let value = readInteger(as: Integer.self) else { throw .endsEarly }
        return value
    }

    mutating func readOperationBytes(count: Int) throws(OperationError) -> [UInt8] {
        guard let bytes = readBytes(length: count) else { throw .endsEarly }
        return bytes
    }

    /// A *text* field.
    mutating func readOperationText() throws(OperationError) -> String {
        let text: String?
        do {
            text = try readLengthPrefixedText(UInt16.self, limit: Int(UInt16.max))
        } catch {
            throw .malformed(error.description)
        }
        guard let text else { throw .endsEarly }
        return text
    }

    /// A *blob* field of at most `limit` bytes, as a slice of this buffer.
    mutating func readOperationBlob(limit: Int) throws(OperationError) -> ByteBuffer {
        let blob: ByteBuffer?
        do {
            blob = try readLengthPrefixedSlice(UInt32.self, limit: limit)
        } catch {
            throw .malformed(error.description)
        }
        guard let blob else { throw .endsEarly }
        return blob
    }

    /// A *list*'s item count.
    mutating func readOperationListCount() throws(OperationError) -> Int {
        Int(try readOperationInteger(UInt16.self))
    }

    /// A 0/1 flag; `what` names it in the error.
    mutating func readOperationFlag(_ what: String) throws(OperationError) -> Bool {
        switch try readOperationInteger(UInt8.self) {
        case 0: return false
        case 1: return true
        default: throw .malformed("\(what) is not 0 or 1")
        }
    }

    mutating func readOperationID() throws(OperationError) -> OperationID {
        guard let id = OperationID(bytes: try readOperationBytes(count: OperationID.byteCount)) else { throw .endsEarly }
        return id
    }

    /// A user's key, taken as bytes (SPEC.md §12.1): the author's is checked by the signature,
    /// and a participant key that is no curve point names a user who can never sign.
    mutating func readOperationUser() throws(OperationError) -> UserID {
        PublicIdentity(unvalidatedBytes: try readOperationBytes(count: PublicIdentity.byteCount))
    }

    func expectOperationEnd(_ what: String) throws(OperationError) {
        guard readableBytes == 0 else { throw .malformed("\(readableBytes) unexpected bytes after \(what)") }
    }

    // MARK: - Writing

    /// A *text* field. The caller keeps text under 65536 bytes (`Operation.structuralError`).
    @discardableResult
    mutating func writeOperationText(_ text: String) -> Int {
        writeLengthPrefixedText(text, UInt16.self)
    }

    /// A *blob* field.
    @discardableResult
    mutating func writeOperationBlob(_ bytes: some Collection<UInt8>) -> Int {
        writeLengthPrefixedBytes(bytes, UInt32.self)
    }

    /// A *list*'s item count. The caller keeps lists under 65536 items.
    @discardableResult
    mutating func writeOperationListCount(_ count: Int) -> Int {
        guard let count = UInt16(exactly: count) else { preconditionFailure("a list of \(count) items does not fit a u16 count") }
        return writeInteger(count)
    }

    @discardableResult
    mutating func writeOperationFlag(_ flag: Bool) -> Int {
        writeInteger(UInt8(flag ? 1 : 0))
    }
}

extension OperationError {
    /// Every short read in an operation says the same: the bytes stop before the fields do.
    static let endsEarly = OperationError.malformed("the operation ends early")
}
