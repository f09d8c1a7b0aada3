import GRDB
import GRDBSQLite

/// Parameters bound straight through SQLite's C API, for the statements the apply path runs
/// several times per operation (the log row, the message, its parts and receipts).
///
/// GRDB's `StatementArguments` hold each value as an existential and convert it on every
/// execution, and a `Data` per identifier copies it first: with ten values a row, that cost
/// more than SQLite's own work. Here each value goes from the model's bytes to SQLite (which
/// copies it, `SQLITE_TRANSIENT`), and GRDB still executes the statement, so its bookkeeping
/// (transactions, failed statements leaving the cache) is unchanged.
struct DirectBindings {
    private let owner: Statement
    private let statement: SQLiteStatement
    /// The first failure, reported once every value is bound (binding only fails on misuse).
    /// (`Statement.sql` is not kept: GRDB trims it on every read.)
    private(set) var failure: CInt = SQLITE_OK

    fileprivate init(_ statement: Statement) {
        owner = statement
        self.statement = statement.sqliteStatement
    }

    /// SQLite copies what it is given before the call returns.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    mutating func bind(_ index: CInt, blob bytes: [UInt8]) {
        let code = bytes.withUnsafeBytes { raw in
            // An empty array may have no address, which SQLite would take for NULL.
            guard let base = raw.baseAddress, raw.count > 0 else { return sqlite3_bind_zeroblob(statement, index, 0) }
            return sqlite3_bind_blob(statement, index, base, CInt(raw.count), Self.transient)
        }
        check(code)
    }

    mutating func bind(_ index: CInt, _ value: Int64) { check(sqlite3_bind_int64(statement, index, value)) }

    mutating func bindNull(_ index: CInt) { check(sqlite3_bind_null(statement, index)) }

    mutating func bind(_ index: CInt, _ value: Int) { bind(index, Int64(value)) }

    mutating func bind(_ index: CInt, _ value: Bool) { bind(index, Int64(value ? 1 : 0)) }

    mutating func bind(_ index: CInt, _ value: String?) {
        guard var value else { return check(sqlite3_bind_null(statement, index)) }
        let code = value.withUTF8 { utf8 -> CInt in
            guard let base = utf8.baseAddress else { return sqlite3_bind_text(statement, index, "", 0, Self.transient) }
            return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                sqlite3_bind_text(statement, index, $0, CInt(utf8.count), Self.transient)
            }
        }
        check(code)
    }

    mutating func bind(_ index: CInt, _ value: Int64?) {
        guard let value else { return check(sqlite3_bind_null(statement, index)) }
        bind(index, value)
    }

    private mutating func check(_ code: CInt) {
        if code != SQLITE_OK && failure == SQLITE_OK { failure = code }
    }

    fileprivate func error(_ db: Database) -> DatabaseError? {
        failure == SQLITE_OK ? nil : DatabaseError(resultCode: ResultCode(rawValue: failure), message: db.lastErrorMessage, sql: owner.sql)
    }
}

extension Statement {
    /// Executes the statement with parameters `bind` sets through `DirectBindings` (every
    /// parameter must be set: none keeps a value from an earlier execution).
    func execute(_ db: Database, binding bind: (inout DirectBindings) -> Void) throws {
        try prepareDirect(db, bind)
        try execute()
    }

    /// The first column of the first row the statement returns (`RETURNING`), with
    /// parameters `bind` sets.
    func fetchInt64(_ db: Database, binding bind: (inout DirectBindings) -> Void) throws -> Int64? {
        try prepareDirect(db, bind)
        return try Int64.fetchOne(self)
    }

    private func prepareDirect(_ db: Database, _ bind: (inout DirectBindings) -> Void) throws {
        // Resets the statement, clears its bindings and marks its (empty) arguments as bound,
        // so `execute()` runs it with the bindings set below. A cached statement never holds a
        // failed step here: GRDB takes a statement that failed out of its cache.
        setUncheckedArguments(StatementArguments())
        var bindings = DirectBindings(self)
        bind(&bindings)
        if let error = bindings.error(db) { throw error }
    }
}
