import Foundation
import GRDB
import Synchronization
import WeftModel

/// The outbox: the local user's messages accepted for sending, kept until the mesh has them or
/// they fail. Owns the `outbox` table (reading it, marking entries sent, failed or tried again,
/// expiring them) and `UnsentSlots`, which maps a peer's acknowledgements back to the unsent
/// messages (`Outbox+Acknowledgements.swift`). Entries are written with their messages by
/// `Store.commitLocal`, in the same transaction (`Materializer.insert(outbox:)`,
/// `noteUnsent(_:in:)`). Every change to an entry is published to `Store.changes()`
/// subscribers (a message's "sent" flag follows it).
final class Outbox: Sendable {
    static let columns = "SELECT message, conversation, createdAt, expiresAt, attempts, state, reason FROM outbox"

    let database: any DatabaseWriter
    let localUser: UserID
    let transactions: Transactions
    /// The local user's unsent messages by slot, for acknowledgements (`UnsentSlots`).
    let unsent: Mutex<UnsentSlots>

    /// Reads the unsent entries' slots as the store opens.
    init(database: any DatabaseWriter, localUser: UserID, transactions: Transactions) throws {
        self.database = database
        self.localUser = localUser
        self.transactions = transactions
        unsent = Mutex(try database.read(Self.unsentSlots))
    }

    /// Entries still waiting to be sent (neither sent nor failed), oldest first.
    func fetchWaitingEntries() async throws -> [OutboxEntry] {
        try await database.read(Self.waitingEntries)
    }

    /// `fetchWaitingEntries()`, blocking the calling thread.
    func waitingEntries() throws -> [OutboxEntry] {
        try database.read(Self.waitingEntries)
    }

    private static func waitingEntries(in db: Database) throws -> [OutboxEntry] {
        try Row.fetchAll(db.cached("\(columns) WHERE state = 'waiting' ORDER BY createdAt, message")).map(OutboxEntry.init(row:))
    }

    /// Which of `messages` wait in the outbox (neither sent nor failed).
    func fetchWaiting(among messages: [OperationID]) async throws -> Set<OperationID> {
        try await database.read { db in try Self.waiting(among: messages, in: db) }
    }

    /// `fetchWaiting(among:)`, blocking the calling thread.
    func waiting(among messages: [OperationID]) throws -> Set<OperationID> {
        try database.read { db in try Self.waiting(among: messages, in: db) }
    }

    /// Every entry, whatever its state, oldest first.
    func entries() throws -> [OutboxEntry] {
        try database.read { db in
            try Row.fetchAll(db.cached("\(Self.columns) ORDER BY createdAt, message")).map(OutboxEntry.init(row:))
        }
    }

    /// The mesh has the message: it leaves the outbox.
    func markSent(_ message: OperationID) async throws {
        try await setState(of: message, to: .sent)
        unsent.withLock { $0.remove([message]) }
    }

    /// `Store.markSent(among:)`: those of `operations` in the outbox are sent, in one
    /// transaction; returns the messages that became sent.
    func markSent(among operations: [OperationID]) async throws -> [OperationID] {
        guard !operations.isEmpty else { return [] }
        // Lost in a power cut, the marks come back: the messages are sent and acknowledged again.
        let sent = try await transactions.write(syncing: false) { db in
            let withMessages = self.transactions.bus.wantMessages
            var sent: [(entry: OutboxEntry, previous: OutboxEntry.State?)] = []
            let update = try db.cachedStatement(sql: "UPDATE outbox SET state = 'sent', reason = NULL WHERE message = ?")
            for chunk in operations.chunked(500) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                let entries = try Row.fetchAll(
                    db.cached("\(Self.columns) WHERE state != 'sent' AND message IN (\(marks))"),
                    arguments: StatementArguments(chunk.map { Data($0.bytes) })
                ).map(OutboxEntry.init(row:))
                for var entry in entries {
                    try update.execute(arguments: [Data(entry.message.bytes)])
                    let previous = entry.state
                    entry.state = .sent
                    sent.append((entry, previous))
                }
            }
            let changes = try Self.changes(sent, withMessages: withMessages, in: db)
            return (changes.map(\.entry.message), Publication(outbox: changes, includesMessages: withMessages))
        }
        // Committed: none of them is unsent now (those without a waiting or failed entry were not).
        unsent.withLock { $0.remove(operations) }
        return sent
    }

    /// The message failed for good, with the reason (one line, for the sender's callback).
    func markFailed(_ message: OperationID, reason: String) async throws {
        try await setState(of: message, to: .failed(reason: reason))
    }

    /// Counts one more attempt to send the message.
    func recordAttempt(_ message: OperationID) async throws {
        try await transactions.write { db in
            guard var entry = try Self.entry(message, in: db) else { throw Self.unknownEntry(message) }
            try db.execute(sql: "UPDATE outbox SET attempts = attempts + 1 WHERE message = ?", arguments: [Data(message.bytes)])
            entry.attempts += 1
            return ((), Publication(outbox: try Self.changes([(entry, entry.state)], in: db)))
        }
    }

    /// `Store.expireOutbox(wallMilliseconds:)`: fails every waiting entry whose time to live
    /// ran out, and its message for the recipients not delivered; returns the entries.
    func expireOutbox(wallMilliseconds: UInt64) async throws -> [OutboxEntry] {
        try await transactions.write { db in
            let now = Int64(clamping: wallMilliseconds)
            let expired = try Row.fetchAll(
                db.cached("\(Self.columns) WHERE state = 'waiting' AND expiresAt <= ? ORDER BY createdAt, message"),
                arguments: [now]
            ).map(OutboxEntry.init(row:))
            // Why each waited, if the node knew (`noteWaiting`), goes into its failure.
            let waiting = try Self.waitingReasons(of: expired.map { Data($0.message.bytes) }, in: db)
            let failed = try expired.map { entry -> OutboxEntry in
                let reason = "its time to live ran out before a peer took it" + (waiting[Data(entry.message.bytes)].map { "; \($0)" } ?? "")
                try db.execute(sql: "UPDATE outbox SET state = 'failed', reason = ? WHERE message = ?", arguments: [reason, Data(entry.message.bytes)])
                var entry = entry
                entry.state = .failed(reason: reason)
                return entry
            }
            var changes = ChangeSet()
            changes.messages = try DeliveryFailures.expireRecipients(now: UInt64(clamping: now), waitingReasons: waiting, in: db)
            return (failed, Publication(changes: changes, outbox: try Self.changes(failed.map { ($0, .waiting) }, in: db)))
        }
    }

    /// Notes why these messages still wait to be sent (a rule withholds them from the only
    /// peers connected, §13.3), for those still waiting: their pending recipients show it,
    /// and a message that fails at the end of its time to live says it. Sending clears it.
    func noteWaiting(_ messages: [OperationID], reason: String) async throws {
        try await transactions.write { db in
            let update = try db.cachedStatement(sql: "UPDATE outbox SET reason = ? WHERE message = ? AND state = 'waiting'")
            for message in messages { try update.execute(arguments: [reason, Data(message.bytes)]) }
            return ((), Publication())
        }
    }

    /// Why each of these messages waits, for those still waiting that have a reason.
    static func waitingReasons(of messages: some Collection<Data>, in db: Database) throws -> [Data: String] {
        var reasons: [Data: String] = [:]
        for chunk in Array(messages).chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            let rows = try Row.fetchAll(
                db, sql: "SELECT message, reason FROM outbox WHERE state = 'waiting' AND reason IS NOT NULL AND message IN (\(marks))",
                arguments: StatementArguments(Array(chunk)))
            for row in rows { reasons[try row.blob(0, "outbox.message")] = try row.text(1, "outbox.reason") }
        }
        return reasons
    }

    private func setState(of message: OperationID, to state: OutboxEntry.State) async throws {
        try await transactions.write { db in
            guard var entry = try Self.entry(message, in: db) else { throw Self.unknownEntry(message) }
            try db.execute(
                sql: "UPDATE outbox SET state = ?, reason = ? WHERE message = ?",
                arguments: [state.column, state.reason, Data(message.bytes)])
            let previous = entry.state
            entry.state = state
            guard previous != state else { return ((), Publication()) }
            return ((), Publication(outbox: try Self.changes([(entry, previous)], in: db)))
        }
    }

    private static func entry(_ message: OperationID, in db: Database) throws -> OutboxEntry? {
        try Row.fetchOne(db.cached("\(columns) WHERE message = ?"), arguments: [Data(message.bytes)]).map(OutboxEntry.init(row:))
    }

    /// The changes to publish for entries, with their messages as they now are, read together
    /// (`withMessages` false: without them, for commits no subscriber reads messages from).
    private static func changes(
        _ entries: [(entry: OutboxEntry, previous: OutboxEntry.State?)], withMessages: Bool = true, in db: Database
    ) throws -> [OutboxChange] {
        guard withMessages else { return entries.map { OutboxChange(entry: $0.entry, previousState: $0.previous, message: nil) } }
        var snapshots: [OperationID: MessageSnapshot] = [:]
        for chunk in entries.chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            let rows = try Row.fetchAll(
                db.cached("\(MessageQueries.columns) WHERE m.id IN (\(marks))"), arguments: StatementArguments(chunk.map { Data($0.entry.message.bytes) }))
            for snapshot in try MessageQueries.messages(rows: rows, countingFromEnd: true, in: db) { snapshots[snapshot.id] = snapshot }
        }
        return entries.map { OutboxChange(entry: $0.entry, previousState: $0.previous, message: snapshots[$0.entry.message]) }
    }

    /// The local user's messages among `changes` still waiting in the outbox.
    /// `inserted`: entries this transaction wrote waiting. Only a message `UnsentSlots` names
    /// can wait, so a commit that touches messages sent long ago (their receipts) asks the
    /// outbox nothing, and neither does one that posts.
    func waitingMessages(among changes: ChangeSet, inserted: Set<OperationID> = [], in db: Database) throws -> Set<OperationID> {
        let localUser = self.localUser
        let local = Set(changes.messages.compactMap { change in change.snapshot.flatMap { $0.sender == localUser ? $0.id : nil } })
        var waiting = local.intersection(inserted)
        let unknown = unsent.withLock { unsent in local.filter { !waiting.contains($0) && unsent.contains($0) } }
        waiting.formUnion(try Self.waiting(among: Array(unknown), in: db))
        return waiting
    }

    static func waiting(among messages: [OperationID], in db: Database) throws -> Set<OperationID> {
        var waiting: Set<OperationID> = []
        for chunk in messages.chunked(500) {
            for id in try Data.fetchAll(db.cached(waitingSQL(count: chunk.count)), arguments: StatementArguments(chunk.map { Data($0.bytes) }))
            {
                waiting.insert(try Stored.operationID(id, "outbox.message"))
            }
        }
        return waiting
    }

    /// Which of `count` messages still wait. Each is looked up by its key: the unary `+` keeps
    /// SQLite off the state index, which it would otherwise pick and then read every waiting
    /// entry (milliseconds per commit once thousands wait).
    static func waitingSQL(count: Int) -> String {
        "SELECT message FROM outbox WHERE message IN (\(Array(repeating: "?", count: count).joined(separator: ","))) AND +state = 'waiting'"
    }

    private static func unknownEntry(_ message: OperationID) -> StoreError {
        StoreError(.unknownOutboxEntry, "the outbox has no entry for message \(message)")
    }
}

extension OutboxEntry {
    /// An entry from a row of `Outbox.columns`.
    init(row: Row) throws {
        let state: State =
            switch try row.text(5, "outbox.state") {
            case "sent": .sent
            case "failed": .failed(reason: try row.optionalText(6, "outbox.reason") ?? "")
            default: .waiting
            }
        self.init(
            message: try row.operationID(0, "outbox.message"), conversation: try row.conversationID(1, "outbox.conversation"),
            createdAt: UInt64(clamping: try row.integer(2, "outbox.createdAt")), timeToLive: 0,
            attempts: try row.count(4, "outbox.attempts"), state: state)
        expiresAt = UInt64(clamping: try row.integer(3, "outbox.expiresAt"))
    }
}
