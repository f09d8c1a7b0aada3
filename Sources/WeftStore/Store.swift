import Foundation
import GRDB
import WeftCrypto
import WeftModel

/// A node's conversations on disk: the operation log, the state it implies (materialized in
/// tables readers query), and the outbox. One `Sendable` type over `any DatabaseWriter`: a
/// `DatabasePool` in WAL mode on disk, an in-memory `DatabaseQueue` in tests.
///
/// Writes go through the in-memory `Replica` (the merge rules) and then to SQLite in one
/// transaction, so the tables always equal what the replica says. Reads go to SQLite only, so
/// a large store stays cheap in memory: the replica in memory is partial (see
/// `OperationLog+Loading.swift`), built on the first write from the index of creations and
/// holding only the logs writes need, and a process that only queries never builds it.
///
/// Every write is `async` and runs on GRDB's writer queue, which is the store's lock: writers
/// wait their turn without holding a thread of the cooperative pool across SQLite's fsync.
/// After each commit, whoever wrote, the store tells every `changes()` subscriber what changed.
/// `LocalAuthor` writes as the local user (signing, the clock, delivered receipts) over a store.
///
/// The store is a facade over components that share its one database writer, each owning one
/// seam: `OperationLog` (the operations and the replica), `Outbox` and `DeliveryFailures`
/// (sending), `LogSummaries` (what replication reads), `ConversationQueries` and
/// `MessageQueries` (reads), and `ChangeBus` (subscribers), with `Transactions` running every
/// write and telling the bus once it commits. The writes that span seams in one transaction,
/// applying received operations and committing local ones, are the store's own
/// (`Store+Receiving.swift`, `Store+LocalWrites.swift`): the components take part through the
/// `Database` of that transaction.
public final class Store: Sendable {
    /// The database file inside the store's directory.
    public static let fileName = "weft.sqlite"
    /// How far ahead of the wall clock a peer's timestamp may be (SPEC.md §13.1: 60 s).
    public static let defaultFutureTolerance: UInt64 = 60_000

    /// The user whose unread flags and counts the store keeps.
    public let localUser: UserID
    /// Milliseconds a received operation's timestamp may be ahead of the wall clock.
    public let futureTolerance: UInt64
    /// How many operations the conversation logs kept in memory between writes may hold
    /// together (see `OperationLog+Loading.swift`).
    public var cachedOperationLimit: Int { operationLog.cachedOperationLimit }
    /// How many operations waiting for causes one log may hold; a commit that leaves more
    /// deletes the oldest (see `OperationLog+Pending.swift`).
    public let pendingLimit: Int
    /// Milliseconds before the wall clock an operation waiting for causes may be stamped: a
    /// commit deletes older ones it would leave waiting, and `expirePending(olderThan:)`
    /// (called with the wall clock less this) deletes those held.
    public let pendingLifetime: UInt64

    // MARK: - Components

    /// The store's one writer (a pool on disk, a queue in memory), shared by every component.
    let database: any DatabaseWriter
    /// Who listens to `changes()`, and the number of the last batch published.
    let changeBus: ChangeBus
    /// Every write transaction, and what follows its commit.
    let transactions: Transactions
    /// The operations the store holds, and the partial replica that decided them.
    let operationLog: OperationLog
    /// The outbox: the local user's messages on their way out. (Not `outbox`: that is the
    /// public read of the waiting entries.)
    let outgoing: Outbox
    /// The per-recipient failures of the local user's messages.
    let failures: DeliveryFailures
    /// Each log's summary, and what a commit stored for replication.
    let summaries: LogSummaries
    /// Reads of conversations, and the local user's memberships.
    let conversationQueries: ConversationQueries
    /// Reads of messages.
    let messageQueries: MessageQueries

    /// Opens (or creates) a store.
    /// - Parameters:
    ///   - directory: where `weft.sqlite` lives (created if missing); nil keeps the store in
    ///     memory, for tests.
    ///   - localUser: the user this node belongs to; a store on disk refuses another.
    ///   - cachedOperationLimit: past this many operations in the logs in memory, a write drops
    ///     the logs it did not touch.
    ///   - pendingLimit: how many operations waiting for causes one log may hold.
    ///   - pendingLifetime: how long before the wall clock a waiting operation may be stamped.
    public init(
        directory: URL?, localUser: UserID, futureTolerance: UInt64 = Store.defaultFutureTolerance,
        cachedOperationLimit: Int = Store.defaultCachedOperationLimit, pendingLimit: Int = Store.defaultPendingLimit,
        pendingLifetime: UInt64 = Store.defaultPendingLifetime
    ) throws {
        // A programmer's argument (the node passes the default), not input.
        precondition(pendingLimit >= 0, "a log cannot hold fewer than no pending operations")
        self.localUser = localUser
        self.futureTolerance = futureTolerance
        self.pendingLimit = pendingLimit
        self.pendingLifetime = pendingLifetime
        var configuration = Configuration()
        configuration.label = "weft.store"
        configuration.foreignKeysEnabled = true
        let database: any DatabaseWriter
        if let directory {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let pool = try DatabasePool(path: directory.appendingPathComponent(Self.fileName).path, configuration: configuration)
            // GRDB picks NORMAL for WAL, which can lose the last commits on power loss (never on
            // a process crash). A message accepted for sending must survive both: FULL syncs
            // the WAL on every commit. Only the writer connection commits.
            // The writer's page cache (64 MiB, SQLite's default is 2 MiB) holds the indexes that
            // writes reach at random (operation and message identifiers) in large stores;
            // readers keep the default, so a process that only queries stays small.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.execute(sql: "PRAGMA cache_size = -65536")
            }
            database = pool
        } else {
            database = try DatabaseQueue(configuration: configuration)
        }
        try Schema.migrator.migrate(database)
        try database.write { db in
            let key = Data(localUser.bytes)
            if let stored = try Data.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'localUser'") {
                guard stored == key else {
                    throw StoreError(
                        .wrongLocalUser,
                        "the store at \(directory?.path ?? "memory") belongs to user "
                            + "\(PublicIdentity(unvalidatedBytes: [UInt8](stored))), not \(localUser)")
                }
            } else {
                try db.execute(sql: "INSERT INTO setting (key, value) VALUES ('localUser', ?)", arguments: [key])
            }
        }
        self.database = database
        let bus = ChangeBus()
        let transactions = Transactions(database: database, bus: bus, memberships: Memberships())
        changeBus = bus
        self.transactions = transactions
        operationLog = OperationLog(
            database: database, localUser: localUser, cachedOperationLimit: cachedOperationLimit, transactions: transactions)
        outgoing = try Outbox(database: database, localUser: localUser, transactions: transactions)
        failures = DeliveryFailures(localUser: localUser, transactions: transactions)
        summaries = LogSummaries(database: database)
        conversationQueries = ConversationQueries(database: database, localUser: localUser, memberships: transactions.memberships)
        messageQueries = MessageQueries(database: database)
    }

    deinit { changeBus.finishAll() }

    /// Lets SQLite go of the memory it caches (page caches, statements), without waiting: the
    /// pool's reader connections close once their reads end and reopen on the next read.
    /// A node calls it when a peer that made it read a lot has left (with `HeapTrim`).
    public func releaseMemoryEventually() {
        (database as? DatabasePool)?.releaseMemoryEventually()
    }
}

extension Data {
    /// The first bytes in hex, for messages.
    var hexPrefix: String { prefix(8).map { String(format: "%02x", $0) }.joined() }
}
