import WeftModel

/// Why the store refused a call. A struct over a private enum, so new cases do not break users;
/// compare `code` with the static members (`error.code == .unsupportedQuery`).
///
/// SQLite failures (a full disk, a damaged file) come through as GRDB's `DatabaseError`.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case unsupportedQuery
            case wrongLocalUser
            case damagedLog
            case localOperationRefused
            case staleLocalWrite
            case outboxWithoutMessage
            case unknownOutboxEntry
            case damagedStore
            case tooLarge
            case unknownMessage
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A predicate or sort the store cannot evaluate: an operator that makes no sense for
        /// the property (`.contains` on `sentAt`) or a value of the wrong type.
        public static let unsupportedQuery = Code(.unsupportedQuery)
        /// The store on disk belongs to another local user.
        public static let wrongLocalUser = Code(.wrongLocalUser)
        /// The operation log holds bytes that do not decode: the file was damaged.
        public static let damagedLog = Code(.damagedLog)
        /// A local operation was refused by the merge rules (or waits for causes): nothing was written.
        public static let localOperationRefused = Code(.localOperationRefused)
        /// A local operation was written against an older replica (its sequence number is taken
        /// or skipped); nothing was written. Build it again from `Store.replica`, or use
        /// `commitLocal(building:)`, which builds under the store's lock.
        public static let staleLocalWrite = Code(.staleLocalWrite)
        /// An outbox entry names a message that is not among the operations committed with it.
        public static let outboxWithoutMessage = Code(.outboxWithoutMessage)
        /// No outbox entry for that message.
        public static let unknownOutboxEntry = Code(.unknownOutboxEntry)
        /// A row read from the database is not one the store writes (an identifier or key of the
        /// wrong length, a NULL where a value belongs): the file was damaged or edited.
        public static let damagedStore = Code(.damagedStore)
        /// An operation body the encoding cannot carry (a list or text over its limit, or an
        /// operation over `Operation.maxByteCount`); nothing was written.
        public static let tooLarge = Code(.tooLarge)
        /// No message with that identifier.
        public static let unknownMessage = Code(.unknownMessage)

        public var description: String {
            switch base {
            case .unsupportedQuery: "unsupported query"
            case .wrongLocalUser: "wrong local user"
            case .damagedLog: "damaged operation log"
            case .localOperationRefused: "local operation refused"
            case .staleLocalWrite: "stale local write"
            case .outboxWithoutMessage: "outbox entry without its message"
            case .unknownOutboxEntry: "unknown outbox entry"
            case .damagedStore: "damaged store"
            case .tooLarge: "too large"
            case .unknownMessage: "unknown message"
            }
        }
    }

    public let code: Code
    /// One sentence saying what went wrong, for logs and users.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
