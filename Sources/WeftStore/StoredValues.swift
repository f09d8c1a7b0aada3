import Foundation
import GRDB
import WeftCrypto
import WeftModel

// Values read back from SQLite are checked, not trusted: a damaged or edited file gives one
// `damagedStore` error naming the column, never a trap.

extension Row {
    /// The bytes in column `index`; `column` names it ("message.id") for the error.
    func blob(_ index: Int, _ column: String) throws -> Data {
        let value: Data?
        do {
            value = try decode(Data?.self, atIndex: index)
        } catch {
            throw StoreError.damaged(column, "does not hold bytes (\(error))")
        }
        guard let value else { throw StoreError.damaged(column, "is NULL") }
        return value
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
