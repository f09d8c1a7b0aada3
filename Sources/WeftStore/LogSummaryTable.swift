import Foundation
import GRDB
import WeftModel

/// The tables that keep each log's `LogSummary` (SPEC.md §11.1), written inside every write
/// transaction that stores operations, so they always equal what a scan of `operation` gives
/// and startup reads one row per log instead of the whole log.
///
/// - `log_summary`: per log, the digest (32 bytes, SPEC §14's sum of identifiers), the count of
///   operations held, the newest timestamp, whether the log is published, and whether it was
///   pruned (a tombstone: the operations are gone, the summary stays).
/// - `log_head`: per (log, author), the highest `n` with sequence numbers 1...n all held.
/// - `log_gap`: sequence numbers held above the author's head (arrived past a gap); when the
///   gap fills, the head walks over them and they go.
///
/// "Held" is any status: accepted, pending, rejected.
struct LogSummaryTable {
    let db: Database

    /// An operation stored for the first time by a transaction, as the summary needs it.
    struct Stored {
        var id: OperationID
        var conversation: ConversationID
        var author: UserID
        var sequence: UInt64
        var timestamp: HLCTimestamp

        init(_ signed: SignedOperation) {
            let op = signed.operation
            self.init(id: signed.id, conversation: op.conversation, author: op.author, sequence: op.sequence, timestamp: op.timestamp)
        }

        init(id: OperationID, conversation: ConversationID, author: UserID, sequence: UInt64, timestamp: HLCTimestamp) {
            self.id = id
            self.conversation = conversation
            self.author = author
            self.sequence = sequence
            self.timestamp = timestamp
        }
    }

    // MARK: - Writing

    /// Adds operations stored for the first time (each once) to their logs' summaries. A log
    /// that was pruned loses its tombstone first: its operations are held again from scratch
    /// (SPEC.md §13.8). A new log is published if it is among `publishing`, else it starts
    /// unpublished (`publish(_:)` publishes logs held before).
    func add(_ operations: [Stored], publishing: Set<ConversationID> = []) throws {
        for (conversation, ops) in Dictionary(grouping: operations, by: \.conversation) {
            let key = Data(conversation.bytes)
            var digest = SetDigest()
            var count = 0
            var lastActivity = HLCTimestamp(rawValue: 0)
            var isPublished = publishing.contains(conversation)
            if let row = try Row.fetchOne(
                db.cached("SELECT digest, operationCount, lastActivity, isPublished, isPruned FROM log_summary WHERE conversation = ?"),
                arguments: [key])
            {
                if try row.flag(4, "log_summary.isPruned") {
                    try dropTombstone(conversation)
                } else {
                    digest = try Self.digest(row, 0)
                    count = try row.count(1, "log_summary.operationCount")
                    lastActivity = HLCTimestamp(databaseValue: try row.integer(2, "log_summary.lastActivity"))
                    isPublished = try row.flag(3, "log_summary.isPublished")
                }
            }
            for op in ops {
                digest.insert(op.id)
                count += 1
                lastActivity = max(lastActivity, op.timestamp)
            }
            try db.cachedStatement(sql: """
                INSERT INTO log_summary (conversation, digest, operationCount, lastActivity, isPublished, isPruned)
                VALUES (?, ?, ?, ?, ?, 0)
                ON CONFLICT (conversation) DO UPDATE SET digest = excluded.digest, operationCount = excluded.operationCount,
                    lastActivity = excluded.lastActivity, isPruned = 0
                """).execute(arguments: [key, Data(digest.bytes), count, lastActivity.databaseValue, isPublished])
            for (author, authored) in Dictionary(grouping: ops, by: \.author) {
                try advanceHead(of: author, in: key, holding: authored.map(\.sequence))
            }
        }
    }

    /// Moves an author's head over newly held sequence numbers; those past a gap wait in
    /// `log_gap` until it fills.
    private func advanceHead(of author: UserID, in conversation: Data, holding sequences: [UInt64]) throws {
        let authorKey = Data(author.bytes)
        let stored = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT head FROM log_head WHERE conversation = ? AND author = ?"),
            arguments: [conversation, authorKey])
        let before = UInt64(bitPattern: stored ?? 0)
        var head = before
        var gap = false
        for sequence in Set(sequences).sorted() where sequence > head {
            if sequence == head + 1 {
                head = sequence
            } else {
                gap = true
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO log_gap (conversation, author, sequence) VALUES (?, ?, ?)")
                    .execute(arguments: [conversation, authorKey, Int64(bitPattern: sequence)])
            }
        }
        // Sequence numbers that arrived past a gap earlier (or in this batch) and now follow.
        if gap || head != before {
            let next = try db.cachedStatement(sql: "DELETE FROM log_gap WHERE conversation = ? AND author = ? AND sequence = ? RETURNING 1")
            while head < UInt64.max, try Int.fetchOne(next, arguments: [conversation, authorKey, Int64(bitPattern: head + 1)]) != nil {
                head += 1
            }
        }
        guard head != before else { return }
        try db.cachedStatement(sql: """
            INSERT INTO log_head (conversation, author, head) VALUES (?, ?, ?)
            ON CONFLICT (conversation, author) DO UPDATE SET head = excluded.head
            """).execute(arguments: [conversation, authorKey, Int64(bitPattern: head)])
    }

    /// Takes operations deleted from the operation table (pending ones, each added before) out
    /// of their logs' summaries; a log left with none loses its summary. Operations this
    /// transaction stored and not yet added may be in the table: they count as held here, and
    /// adding them after leaves the summaries right.
    ///
    /// An author's accepted operations are a prefix of their chain, 1...`acceptedThrough(log,
    /// author)`, so the log's other operations (the slot index) say the rest: a deleted
    /// operation within that prefix moves nothing; one past the author's head was a gap, which
    /// goes unless another operation holds its slot (one lookup); only one at or below the head
    /// and past the prefix makes the head walk down again, over the author's operations in the
    /// log that are not accepted (those above it become gaps). Never through the whole log.
    /// `latestAccepted(log)` is the greatest timestamp of its accepted operations, for the last
    /// activity.
    func remove(
        _ operations: [Stored], acceptedThrough: (ConversationID, UserID) -> UInt64,
        latestAccepted: (ConversationID) -> HLCTimestamp?
    ) throws {
        for (conversation, ops) in Dictionary(grouping: operations, by: \.conversation) {
            let key = Data(conversation.bytes)
            guard let row = try Row.fetchOne(
                db.cached("SELECT digest, operationCount, lastActivity FROM log_summary WHERE conversation = ? AND isPruned = 0"),
                arguments: [key])
            else { continue }
            var digest = try Self.digest(row, 0)
            let count = try row.count(1, "log_summary.operationCount") - ops.count
            var lastActivity = HLCTimestamp(databaseValue: try row.integer(2, "log_summary.lastActivity"))
            guard count > 0 else {
                try dropTombstone(conversation)
                continue
            }
            for op in ops { digest.remove(op.id) }
            if ops.contains(where: { $0.timestamp >= lastActivity }) {
                lastActivity = try self.lastActivity(of: key, latestAccepted: latestAccepted(conversation))
            }
            try db.cachedStatement(sql: "UPDATE log_summary SET digest = ?, operationCount = ?, lastActivity = ? WHERE conversation = ?")
                .execute(arguments: [Data(digest.bytes), count, lastActivity.databaseValue, key])
            for (author, authored) in Dictionary(grouping: ops, by: \.author) {
                let accepted = acceptedThrough(conversation, author)
                // Within the accepted prefix a slot stays held: nothing moves.
                let past = Set(authored.map(\.sequence).filter { $0 > accepted })
                guard !past.isEmpty else { continue }
                let authorKey = Data(author.bytes)
                let head = UInt64(bitPattern: try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT head FROM log_head WHERE conversation = ? AND author = ?"),
                    arguments: [key, authorKey]) ?? 0)
                if past.allSatisfy({ $0 > head }) {
                    // Only gaps: each goes unless another operation holds its slot.
                    for sequence in past where try !holdsUnaccepted(author: authorKey, sequence: sequence, in: key) {
                        try db.cachedStatement(sql: "DELETE FROM log_gap WHERE conversation = ? AND author = ? AND sequence = ?")
                            .execute(arguments: [key, authorKey, Int64(bitPattern: sequence)])
                    }
                } else {
                    try rebuildHead(of: author, in: key, acceptedThrough: accepted)
                }
            }
        }
    }

    /// Whether the log holds an operation of `author` with `sequence` that is not accepted.
    private func holdsUnaccepted(author: Data, sequence: UInt64, in conversation: Data) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(sql: """
                SELECT EXISTS (SELECT 1 FROM operation WHERE conversation = ? AND author = ? AND sequence = ? AND status != 'accepted')
                """),
            arguments: [conversation, author, Int64(bitPattern: sequence)]) ?? false
    }

    /// The greatest timestamp among a log's operations: the accepted ones' (from the replica),
    /// the pending ones' (the last of the log's pending index) and the refused ones'.
    private func lastActivity(of conversation: Data, latestAccepted: HLCTimestamp?) throws -> HLCTimestamp {
        var latest = latestAccepted ?? HLCTimestamp(rawValue: 0)
        for status in ["pending", "rejected"] {
            if let value = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT MAX(timestamp) FROM operation WHERE conversation = ? AND status = '\(status)'"),
                arguments: [conversation])
            {
                latest = max(latest, HLCTimestamp(databaseValue: value))
            }
        }
        return latest
    }

    /// Sets an author's head and gaps from what the log holds of them now: the accepted prefix
    /// 1...`accepted` and the slots of the operations that are not accepted.
    private func rebuildHead(of author: UserID, in conversation: Data, acceptedThrough accepted: UInt64) throws {
        let authorKey = Data(author.bytes)
        let held = Set(try Int64.fetchAll(
            db.cachedStatement(sql: "SELECT sequence FROM operation WHERE conversation = ? AND author = ? AND status != 'accepted'"),
            arguments: [conversation, authorKey]
        ).map { UInt64(bitPattern: $0) })
        var head = accepted
        while head < .max, held.contains(head + 1) { head += 1 }
        let gaps = held.filter { $0 > head }
        let before = UInt64(bitPattern: try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT head FROM log_head WHERE conversation = ? AND author = ?"),
            arguments: [conversation, authorKey]) ?? 0)
        if head != before {
            if head == 0 {
                try db.cachedStatement(sql: "DELETE FROM log_head WHERE conversation = ? AND author = ?")
                    .execute(arguments: [conversation, authorKey])
            } else {
                try db.cachedStatement(sql: """
                    INSERT INTO log_head (conversation, author, head) VALUES (?, ?, ?)
                    ON CONFLICT (conversation, author) DO UPDATE SET head = excluded.head
                    """).execute(arguments: [conversation, authorKey, Int64(bitPattern: head)])
            }
        }
        let stored = Set(try Int64.fetchAll(
            db.cachedStatement(sql: "SELECT sequence FROM log_gap WHERE conversation = ? AND author = ?"),
            arguments: [conversation, authorKey]
        ).map { UInt64(bitPattern: $0) })
        for sequence in stored.subtracting(gaps) {
            try db.cachedStatement(sql: "DELETE FROM log_gap WHERE conversation = ? AND author = ? AND sequence = ?")
                .execute(arguments: [conversation, authorKey, Int64(bitPattern: sequence)])
        }
        for sequence in gaps.subtracting(stored) {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO log_gap (conversation, author, sequence) VALUES (?, ?, ?)")
                .execute(arguments: [conversation, authorKey, Int64(bitPattern: sequence)])
        }
    }

    /// Publishes logs; returns those that were not published before (and hold operations).
    func publish(_ conversations: some Sequence<ConversationID>) throws -> Set<ConversationID> {
        var published: Set<ConversationID> = []
        for conversation in Set(conversations) {
            let changed = try Int.fetchOne(
                db.cachedStatement(sql: "UPDATE log_summary SET isPublished = 1 WHERE conversation = ? AND isPublished = 0 RETURNING 1"),
                arguments: [Data(conversation.bytes)])
            if changed != nil { published.insert(conversation) }
        }
        return published
    }

    /// Removes a tombstone and the heads it kept.
    func dropTombstone(_ conversation: ConversationID) throws {
        let key = Data(conversation.bytes)
        try db.execute(sql: "DELETE FROM log_summary WHERE conversation = ?", arguments: [key])
        try db.execute(sql: "DELETE FROM log_head WHERE conversation = ?", arguments: [key])
        try db.execute(sql: "DELETE FROM log_gap WHERE conversation = ?", arguments: [key])
    }

    // MARK: - Reading

    /// The summaries of `conversations` (those with a row), or of every log.
    func summaries(of conversations: [ConversationID]? = nil) throws -> [LogSummary] {
        var heads: [ConversationID: VersionVector] = [:]
        var rows: [Row] = []
        let select = "SELECT conversation, digest, operationCount, lastActivity, isPublished, isPruned FROM log_summary"
        let selectHeads = "SELECT conversation, author, head FROM log_head"
        func readHeads(_ cursor: RowCursor) throws {
            while let row = try cursor.next() {
                heads[try row.conversationID(0, "log_head.conversation"), default: VersionVector()]
                    .set(try row.userID(1, "log_head.author"), UInt64(bitPattern: try row.integer(2, "log_head.head")))
            }
        }
        if let conversations {
            for chunk in conversations.chunked(500) {
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                let arguments = StatementArguments(chunk.map { Data($0.bytes) })
                rows += try Row.fetchAll(db.cached("\(select) WHERE conversation IN (\(marks))"), arguments: arguments)
                try readHeads(try Row.fetchCursor(db, sql: "\(selectHeads) WHERE conversation IN (\(marks))", arguments: arguments))
            }
        } else {
            rows = try Row.fetchAll(db.cached("\(select) ORDER BY conversation"))
            try readHeads(try Row.fetchCursor(db, sql: selectHeads))
        }
        return try rows.map { row in
            let id = try row.conversationID(0, "log_summary.conversation")
            return LogSummary(
                conversation: id, heads: heads[id] ?? VersionVector(), digest: try Self.digest(row, 1),
                operationCount: try row.count(2, "log_summary.operationCount"),
                lastActivity: HLCTimestamp(databaseValue: try row.integer(3, "log_summary.lastActivity")),
                isPublished: try row.flag(4, "log_summary.isPublished"), isPruned: try row.flag(5, "log_summary.isPruned"))
        }
    }

    private static func digest(_ row: Row, _ index: Int) throws -> SetDigest {
        guard let digest = SetDigest(bytes: [UInt8](try row.blob(index, "log_summary.digest"))) else {
            throw StoreError.damaged("log_summary.digest", "is not \(SetDigest.byteCount) bytes")
        }
        return digest
    }

    // MARK: - Filling from the operation table

    /// The summaries a scan of the operation table gives (without publication, which the
    /// operations do not say): what the tables must always equal, and what the migration
    /// fills them from.
    static func scan(_ db: Database) throws -> [ConversationID: (summary: LogSummary, gaps: [UserID: Set<UInt64>])] {
        var sequences: [ConversationID: [UserID: Set<UInt64>]] = [:]
        var summaries: [ConversationID: LogSummary] = [:]
        let rows = try Row.fetchCursor(db, sql: "SELECT id, conversation, author, sequence, timestamp FROM operation")
        while let row = try rows.next() {
            let id = try row.operationID(0, "operation.id")
            let conversation = try row.conversationID(1, "operation.conversation")
            var summary = summaries[conversation] ?? LogSummary(conversation: conversation, isPublished: false)
            summary.digest.insert(id)
            summary.operationCount += 1
            summary.lastActivity = max(summary.lastActivity, HLCTimestamp(databaseValue: try row.integer(4, "operation.timestamp")))
            summaries[conversation] = summary
            sequences[conversation, default: [:]][try row.userID(2, "operation.author"), default: []]
                .insert(UInt64(bitPattern: try row.integer(3, "operation.sequence")))
        }
        var result: [ConversationID: (LogSummary, [UserID: Set<UInt64>])] = [:]
        for (conversation, var summary) in summaries {
            var gaps: [UserID: Set<UInt64>] = [:]
            for (author, held) in sequences[conversation] ?? [:] {
                var head: UInt64 = 0
                while head < .max, held.contains(head + 1) { head += 1 }
                summary.heads.set(author, head)
                let above = held.filter { $0 > head }
                if !above.isEmpty { gaps[author] = above }
            }
            result[conversation] = (summary, gaps)
        }
        return result
    }

    /// Fills the tables of a store written before they existed (the migration): every log
    /// from a scan; a log is published when it holds a message or another user's operation
    /// (nothing says whether a conversation without messages was announced: it stays local).
    static func fill(_ db: Database) throws {
        let localUser = try Data.fetchOne(db.cached("SELECT value FROM setting WHERE key = 'localUser'"))
        var published: Set<ConversationID> = []
        let rows = try Row.fetchCursor(
            db, sql: "SELECT DISTINCT conversation FROM operation WHERE kind IN (5, 10) OR author != ? OR ? IS NULL",
            arguments: [localUser, localUser])
        while let row = try rows.next() { published.insert(try row.conversationID(0, "operation.conversation")) }
        for (conversation, entry) in try scan(db) {
            let key = Data(conversation.bytes)
            try db.execute(
                sql: """
                    INSERT INTO log_summary (conversation, digest, operationCount, lastActivity, isPublished, isPruned)
                    VALUES (?, ?, ?, ?, ?, 0)
                    """,
                arguments: [
                    key, Data(entry.summary.digest.bytes), entry.summary.operationCount, entry.summary.lastActivity.databaseValue,
                    published.contains(conversation),
                ])
            for (author, head) in entry.summary.heads.entries {
                try db.execute(
                    sql: "INSERT INTO log_head (conversation, author, head) VALUES (?, ?, ?)",
                    arguments: [key, Data(author.bytes), Int64(bitPattern: head)])
            }
            for (author, sequences) in entry.gaps {
                for sequence in sequences {
                    try db.execute(
                        sql: "INSERT INTO log_gap (conversation, author, sequence) VALUES (?, ?, ?)",
                        arguments: [key, Data(author.bytes), Int64(bitPattern: sequence)])
                }
            }
        }
    }
}
