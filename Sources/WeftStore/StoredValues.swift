import Foundation
import GRDB
import WeftCrypto
import WeftModel

// Values read back from SQLite are checked, not trusted: a damaged or edited file gives one
// `damagedStore` error naming the column, never a trap.

extension Row {
    /// The bytes in column `index`; `column` names it ("message.id") for the error. Only
    /// SQLite's BLOB storage class is bytes: GRDB would read an INTEGER as its digits from a
    /// statement, and trap on it from a fetched row.
    func blob(_ index: Int, _ column: String) throws -> Data {
        switch try storedValue(index).storage {
        case .blob(let bytes): return bytes
        case .null: throw StoreError.damaged(column, "is NULL")
        case let other: throw StoreError.damaged(column, "holds \(Self.storageClass(other)), not bytes")
        }
    }

    /// The integer in column `index`. Only SQLite's INTEGER storage class is one: GRDB would
    /// read TEXT as 0 from a statement and trap on it from a fetched row.
    func integer(_ index: Int, _ column: String) throws -> Int64 {
        guard let value = try optionalInteger(index, column) else { throw StoreError.damaged(column, "is NULL") }
        return value
    }

    /// The integer in column `index`, nil for NULL.
    func optionalInteger(_ index: Int, _ column: String) throws -> Int64? {
        switch try storedValue(index).storage {
        case .null: return nil
        case .int64(let value): return value
        case let other: throw StoreError.damaged(column, "holds \(Self.storageClass(other)), not an integer")
        }
    }

    /// A count in column `index`: an integer, never negative.
    func count(_ index: Int, _ column: String) throws -> Int {
        let value = try integer(index, column)
        guard value >= 0 else { throw StoreError.damaged(column, "holds \(value), not a count") }
        return Int(value)
    }

    /// The boolean in column `index`: the store writes 0 or 1, nothing else.
    func flag(_ index: Int, _ column: String) throws -> Bool {
        switch try integer(index, column) {
        case 0: return false
        case 1: return true
        case let value: throw StoreError.damaged(column, "holds \(value), not a boolean (0 or 1)")
        }
    }

    /// The text in column `index`.
    func text(_ index: Int, _ column: String) throws -> String {
        guard let value = try optionalText(index, column) else { throw StoreError.damaged(column, "is NULL") }
        return value
    }

    /// The blob in column `index`, nil for NULL.
    func optionalBlob(_ index: Int, _ column: String) throws -> Data? {
        switch try storedValue(index).storage {
        case .null: return nil
        case .blob(let value): return value
        case let other: throw StoreError.damaged(column, "holds \(Self.storageClass(other)), not a blob")
        }
    }

    /// The text in column `index`, nil for NULL.
    func optionalText(_ index: Int, _ column: String) throws -> String? {
        switch try storedValue(index).storage {
        case .null: return nil
        case .string(let value): return value
        case let other: throw StoreError.damaged(column, "holds \(Self.storageClass(other)), not text")
        }
    }

    /// The value as SQLite stores it (reading a `DatabaseValue` never fails).
    private func storedValue(_ index: Int) throws -> DatabaseValue {
        try decode(DatabaseValue.self, atIndex: index)
    }

    private static func storageClass(_ storage: DatabaseValue.Storage) -> String {
        switch storage {
        case .null: "NULL"
        case .int64: "an integer"
        case .double: "a real number"
        case .string: "text"
        case .blob(let bytes): "\(bytes.count) bytes"
        }
    }

    func operationID(_ index: Int, _ column: String) throws -> OperationID {
        try Stored.operationID(blob(index, column), column)
    }

    func conversationID(_ index: Int, _ column: String) throws -> ConversationID {
        try Stored.conversationID(blob(index, column), column)
    }

    func userID(_ index: Int, _ column: String) throws -> UserID {
        try Stored.userID(blob(index, column), column)
    }
}

/// Identifiers and keys from stored bytes, checked for their length.
enum Stored {
    static func operationID(_ bytes: Data, _ column: String) throws -> OperationID {
        guard let id = OperationID(bytes: [UInt8](bytes)) else { throw wrongLength(bytes, column, "an operation identifier", OperationID.byteCount) }
        return id
    }

    static func conversationID(_ bytes: Data, _ column: String) throws -> ConversationID {
        guard let id = ConversationID(bytes: [UInt8](bytes)) else {
            throw wrongLength(bytes, column, "a conversation identifier", ConversationID.byteCount)
        }
        return id
    }

    static func userID(_ bytes: Data, _ column: String) throws -> UserID {
        guard bytes.count == PublicIdentity.byteCount else { throw wrongLength(bytes, column, "a user key", PublicIdentity.byteCount) }
        return PublicIdentity(unvalidatedBytes: [UInt8](bytes))
    }

    private static func wrongLength(_ bytes: Data, _ column: String, _ what: String, _ length: Int) -> StoreError {
        StoreError.damaged(column, "holds \(bytes.count) bytes, not \(what) (\(length) bytes)")
    }
}

extension StoreError {
    /// A stored value that is not one the store writes.
    static func damaged(_ column: String, _ problem: String) -> StoreError {
        StoreError(.damagedStore, "the database is damaged or was edited: \(column) \(problem)")
    }
}
