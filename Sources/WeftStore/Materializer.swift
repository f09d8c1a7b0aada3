import Foundation
import GRDB
import WeftModel

/// Writes one batch inside a write transaction: the operation log rows for what the replica
/// decided, then the rows of every conversation and message the change set names, from its
/// snapshots. After it, the tables equal what `Replica.conversation(_:)` and
/// `Replica.messages(in:)` say.
struct Materializer {
    /// Inline parts up to this many bytes keep their bytes in the `part` table, and a page of
    /// messages carries them (the control protocol's inline limit); larger ones are read from
    /// the operation log on demand.
    static let loadedPartByteCount = 2048

    typealias ConversationChange = ChangeSet.ConversationChange
    typealias MessageChange = ChangeSet.MessageChange

    let db: Database
    let replica: Replica
    let localUser: UserID

    // MARK: - The operation log

    func write(batch: [SignedOperation], report: Replica.Report, changes: ChangeSet) throws {
        try writeLog(batch: batch, report: report)
        try materialize(changes)
    }

    /// Writes the log rows for what the replica decided about `batch`. Returns the operations
    /// of `batch` the log held already (stored pending before, or a duplicate), which the
    /// inserts learn for free: asking beforehand cost a lookup in the identifier index each.
    @discardableResult
    func writeLog(batch: [SignedOperation], report: Replica.Report) throws -> Set<OperationID> {
        // Positions, not copies: copying a SignedOperation retains each of its buffers.
        var byID: [OperationID: Int] = [:]
        byID.reserveCapacity(batch.count)
        for (index, signed) in batch.enumerated() { byID[signed.id] = index }
        var order = try Int64.fetchOne(db.cached("SELECT COALESCE(MAX(appliedOrder), 0) FROM operation")) ?? 0

        // Operations decided now that arrived in an earlier batch (pending until this one).
        let update = try db.cachedStatement(sql: Self.redecideOperationSQL)
        let insert = try db.cachedStatement(sql: Self.insertOperationSQL)

        // A report may decide one operation twice (pending, then accepted once a cause in the
        // same batch came): only a row present before the first insert counts as held.
        var held: Set<OperationID> = []
        var inserted: Set<OperationID> = []
        func record(_ id: OperationID, _ status: String, _ reason: String?) throws {
            order += 1
            if let index = byID[id] {
                if try insertOperation(batch[index], order: order, status: status, reason: reason, statement: insert) {
                    inserted.insert(id)
                } else if !inserted.contains(id) {
                    held.insert(id)
                }
            } else {
                try update.execute(arguments: [order, status, reason, Data(id.bytes)])
            }
        }
        for id in report.accepted { try record(id, "accepted", nil) }
        for (id, error) in report.rejected { try record(id, "rejected", error.detail) }
        for id in report.pending { try record(id, "pending", nil) }

        // An equivocation rebuilds its conversation's log without the forked slots: operations
        // accepted before (in this batch or earlier ones) may be refused now.
        let forked = try Set(report.rejected.filter { $0.1.reason == .equivocation }.compactMap { id, _ in
            try byID[id].map { batch[$0].operation.conversation }
                ?? Data.fetchOne(db.cached("SELECT conversation FROM operation WHERE id = ?"), arguments: [Data(id.bytes)])
                .map { try Stored.conversationID($0, "operation.conversation") }
        })
        for conversation in forked {
            let accepted = try Data.fetchAll(
                db.cached("SELECT id FROM operation WHERE conversation = ? AND status = 'accepted'"),
                arguments: [Data(conversation.bytes)])
            for idData in accepted {
                let id = try Stored.operationID(idData, "operation.id")
                guard !replica.isKnown(id, in: conversation) else { continue }
                order += 1
                try update.execute(arguments: [
                    order, "rejected", "its author signed two operations for one sequence number (or it follows one that did)",
                    idData,
                ])
            }
        }
        return held
    }

    /// A held operation decided again (pending until its causes came, or refused by a fork).
    static let redecideOperationSQL = "UPDATE operation SET appliedOrder = ?, status = ?, reason = ? WHERE id = ?"

    /// The insert of a new operation; one already present is re-decided by an update instead.
    /// (Neither an upsert's update nor REPLACE here: either makes SQLite open a statement
    /// journal for every execution, which cost as much as the row.)
    static let insertOperationSQL = """
        INSERT INTO operation (id, conversation, author, sequence, timestamp, kind, wire, appliedOrder, status, reason)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO NOTHING
        """

    /// Writes (or, if present, re-decides) one operation of the log. Returns whether it was new.
    @discardableResult
    func insertOperation(_ signed: SignedOperation, order: Int64, status: String, reason: String?, statement: Statement? = nil) throws -> Bool {
        let op = signed.operation
        try (statement ?? db.cachedStatement(sql: Self.insertOperationSQL)).execute(db) { row in
            row.bind(1, blob: signed.id.bytes)
            row.bind(2, blob: op.conversation.bytes)
            row.bind(3, blob: op.author.bytes)
            row.bind(4, Int64(bitPattern: op.sequence))
            row.bind(5, op.timestamp.databaseValue)
            row.bind(6, Int64(op.body.kind))
            row.bind(7, blob: signed.wireBytes)
            row.bind(8, order)
            row.bind(9, status)
            row.bind(10, reason)
        }
        guard db.changesCount == 0 else {
            // New: the content its parts name is held while it is (retention, SPEC.md §11.2).
            try ContentReferenceTable.add(signed, in: db)
            return true
        }
        try db.cachedStatement(sql: Self.redecideOperationSQL)
            .execute(arguments: [order, status, reason, Data(signed.id.bytes)])
        return false
    }

    // MARK: - Conversations and messages

    /// Writes the rows of every conversation and message `changes` names, from its snapshots.
    func materialize(_ changes: ChangeSet) throws {
        // Conversations created or updated, with the properties that changed.
        var upserts: [ConversationID: (snapshot: ConversationSnapshot, properties: Set<ConversationChange.Property>, created: Bool)] = [:]
        var deleted: [ConversationID] = []
        // Unread counts before the batch, where they changed.
        var unreadBefore: [ConversationID: Int] = [:]
        for change in changes.conversations {
            // A creation or an update carries the conversation as it is after it; one without
            // (which the replica never makes) writes nothing rather than trapping.
            switch (change.kind, change.snapshot) {
            case (.create, let snapshot?):
                upserts[change.id] = (snapshot, [], true)
            case (.update, let snapshot?):
                upserts[change.id, default: (snapshot, [], false)].properties.formUnion(change.property.map { [$0] } ?? [])
                if change.property == .unreadCount, case .int(let old) = change.oldValue, unreadBefore[change.id] == nil {
                    unreadBefore[change.id] = old
                }
            case (.delete, _):
                deleted.append(change.id)
            case (.create, nil), (.update, nil):
                continue
            }
        }
        for (_, entry) in upserts.sorted(by: { $0.key < $1.key }) {
            try writeConversation(entry.snapshot, properties: entry.created ? nil : entry.properties)
        }
        for id in deleted {
            // Merged into another conversation: its row became an alias when the canonical
            // conversation was written; only a row still canonical goes.
            try db.execute(sql: "DELETE FROM conversation WHERE id = ? AND canonical = id", arguments: [Data(id.bytes)])
        }

        var messageUpserts: [OperationID: MessageUpsert] = [:]
        messageUpserts.reserveCapacity(changes.messages.count)
        for change in changes.messages {
            // As for conversations: a creation or an update carries the message after it.
            switch (change.kind, change.snapshot) {
            case (.create, let snapshot?):
                messageUpserts[change.id] = MessageUpsert(snapshot: snapshot, created: true)
            case (.update, let snapshot?):
                messageUpserts[change.id, default: MessageUpsert(snapshot: snapshot, created: false)].note(change)
            case (.create, nil), (.update, nil):
                continue
            case (.delete, _):
                try db.cachedStatement(sql: "DELETE FROM message WHERE id = ?").execute(arguments: [Data(change.id.bytes)])
            }
        }
        // New unread messages per conversation: the unread count moving by just these leaves
        // the flags of the others as they were.
        var insertedUnread: [ConversationID: Int] = [:]
        for (_, entry) in messageUpserts {
            if entry.created {
                if try insertMessage(entry.snapshot) { insertedUnread[entry.snapshot.conversation, default: 0] += 1 }
            } else if entry.properties != [.position] {  // positions are computed on read
                try updateMessage(entry.snapshot, statuses: entry.statusWrite)
            }
        }

        // The unread flag follows the local user's recipient status, which a snapshot lists
        // only while the local user is a participant: for a conversation the local user left
        // (or, on a relay, never joined), recompute the flags from the replica when its unread
        // count moves, unless it moved by exactly the new unread messages (their flags came
        // from the replica as they were inserted). A relay would otherwise read every message
        // of a conversation for each batch it stores.
        for (id, entry) in upserts
        where !entry.snapshot.participants.contains(localUser) && (entry.created || entry.properties.contains(.unreadCount)) {
            if !entry.created, let before = unreadBefore[id], entry.snapshot.unreadCount == before + insertedUnread[id, default: 0] {
                continue
            }
            try refreshUnreadFlags(in: entry.snapshot.id)
        }
    }

    /// Writes a canonical conversation's row, and its participants, metadata and alias rows
    /// when they are new or changed (`properties` nil: all of them).
    func writeConversation(_ snapshot: ConversationSnapshot, properties: Set<ConversationChange.Property>?) throws {
        let id = Data(snapshot.id.bytes)
        try db.cachedStatement(sql: """
            INSERT INTO conversation (id, canonical, creator, createdAt, isDistinct, messageCount, unreadCount, lastMessageAt)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET canonical = excluded.canonical, creator = excluded.creator,
                createdAt = excluded.createdAt, isDistinct = excluded.isDistinct, messageCount = excluded.messageCount,
                unreadCount = excluded.unreadCount, lastMessageAt = excluded.lastMessageAt
            """).execute(arguments: [
                id, id, Data(snapshot.creator.bytes), snapshot.createdAt.databaseValue, snapshot.isDistinct,
                snapshot.messageCount, snapshot.unreadCount, snapshot.lastMessageAt?.databaseValue,
            ])
        if properties?.contains(.participants) ?? true {
            try db.execute(sql: "DELETE FROM participant WHERE conversation = ?", arguments: [id])
            let insert = try db.cachedStatement(sql: "INSERT INTO participant (conversation, user) VALUES (?, ?)")
            for user in snapshot.participants { try insert.execute(arguments: [id, Data(user.bytes)]) }
        }
        if properties?.contains(.metadata) ?? true {
            try db.execute(sql: "DELETE FROM metadata WHERE conversation = ?", arguments: [id])
            let insert = try db.cachedStatement(sql: "INSERT INTO metadata (conversation, key, value) VALUES (?, ?, ?)")
            for (key, value) in snapshot.metadata { try insert.execute(arguments: [id, key, value]) }
        }
        if properties?.contains(.mergedIDs) ?? true {
            for merged in snapshot.mergedIDs {
                let alias = Data(merged.bytes)
                try db.execute(sql: """
                    INSERT INTO conversation (id, canonical) VALUES (?, ?)
                    ON CONFLICT (id) DO UPDATE SET canonical = excluded.canonical, creator = NULL, createdAt = NULL,
                        isDistinct = NULL, messageCount = NULL, unreadCount = NULL, lastMessageAt = NULL
                    """, arguments: [alias, id])
                try db.execute(sql: "DELETE FROM participant WHERE conversation = ?", arguments: [alias])
                try db.execute(sql: "DELETE FROM metadata WHERE conversation = ?", arguments: [alias])
            }
        }
    }

    /// Inserts a message with its parts and statuses; `isUnread` nil asks the replica.
    /// Returns the unread flag it wrote.
    @discardableResult
    func insertMessage(_ snapshot: MessageSnapshot, isUnread: Bool? = nil) throws -> Bool {
        let unread = isUnread ?? replica.isUnread(snapshot.id, postedTo: snapshot.postedTo)
        // No RETURNING on the insert: SQLite buffers returned rows in a temporary table it
        // creates for every execution, which cost more than the insert itself.
        try db.cachedStatement(sql: """
            INSERT INTO message (id, conversation, postedTo, sender, sentAt, isUnread, notificationText, notificationSound)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO NOTHING
            """).execute(db) { row in
                row.bind(1, blob: snapshot.id.bytes)
                row.bind(2, blob: snapshot.conversation.bytes)
                row.bind(3, blob: snapshot.postedTo.bytes)
                row.bind(4, blob: snapshot.sender.bytes)
                row.bind(5, snapshot.sentAt.databaseValue)
                row.bind(6, unread)
                row.bind(7, snapshot.options.notificationText)
                row.bind(8, snapshot.options.notificationSound)
            }
        let number: Int64
        let fresh = db.changesCount == 1
        if fresh {
            number = db.lastInsertedRowID
        } else {
            // Present already (a message a merge moves): its conversation and flag follow.
            guard let existing = try db.cachedStatement(sql: "UPDATE message SET conversation = ?, isUnread = ? WHERE id = ? RETURNING number")
                .fetchInt64(db, binding: { row in
                    row.bind(1, blob: snapshot.conversation.bytes)
                    row.bind(2, unread)
                    row.bind(3, blob: snapshot.id.bytes)
                })
            else { throw StoreError(.damagedStore, "message \(snapshot.id) is neither new nor in the message table") }
            number = existing
        }
        // A new row number has no parts or receipts yet (deleting a message deletes them):
        // plain inserts, which SQLite runs without a statement journal.
        let part = try db.cachedStatement(sql: fresh
            ? #"INSERT INTO part (message, "index", mimeType, data, content, size) VALUES (?, ?, ?, ?, ?, ?)"#
            : #"INSERT OR REPLACE INTO part (message, "index", mimeType, data, content, size) VALUES (?, ?, ?, ?, ?, ?)"#)
        for (index, messagePart) in snapshot.parts.enumerated() {
            try part.execute(db) { row in
                row.bind(1, number)
                row.bind(2, index)
                row.bind(3, messagePart.mimeType)
                // Larger bodies stay in the operation log only (v7).
                row.bind(4, blob: messagePart.data.count <= Self.loadedPartByteCount ? messagePart.data : [])
                if let content = messagePart.content { row.bind(5, blob: content.encoding) } else { row.bindNull(5) }
                row.bind(6, Int64(clamping: messagePart.content == nil ? messagePart.byteCount : 0))
            }
        }
        try writeStatuses(of: snapshot, number: number, replacing: false, fresh: fresh)
        return unread
    }

    /// What a batch changes in one message row.
    private struct MessageUpsert {
        var snapshot: MessageSnapshot
        var created: Bool
        var properties: Set<MessageChange.Property> = []
        /// The statuses before the batch, from its one status change (nil after two: then the
        /// rows are written whole).
        var statusesBefore: [UserID: RecipientStatus]?
        var statusChanges = 0

        mutating func note(_ change: MessageChange) {
            guard let property = change.property else { return }
            properties.insert(property)
            if property == .recipientStatus {
                statusChanges += 1
                if case .statuses(let old) = change.oldValue { statusesBefore = old }
            }
        }

        var statusWrite: StatusWrite {
            guard properties.contains(.recipientStatus) else { return .none }
            guard statusChanges == 1, let statusesBefore else { return .whole }
            return .changed(from: statusesBefore)
        }
    }

    /// How an update writes a message's receipt rows.
    private enum StatusWrite {
        case none
        /// Deletes them and writes them all again.
        case whole
        /// Writes only the recipients whose status moved from these (a receipt moves one):
        /// for a sender whose messages are delivered by the thousand, a row each instead of
        /// deleting and rewriting every recipient's.
        case changed(from: [UserID: RecipientStatus])
    }

    private func updateMessage(_ snapshot: MessageSnapshot, statuses: StatusWrite) throws {
        // Read, then write only what moved: most updates are receipts, which move neither the
        // conversation nor the unread flag, and an UPDATE … RETURNING builds a temporary table
        // on every execution (a sender applying receipts for thousands of messages paid it for
        // each one).
        guard let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT number, conversation, isUnread FROM message WHERE id = ?"),
            arguments: [Data(snapshot.id.bytes)])
        else {
            try insertMessage(snapshot)
            return
        }
        let number = try row.integer(0, "message.number")
        let conversation = Data(snapshot.conversation.bytes)
        let unread = replica.isUnread(snapshot.id, postedTo: snapshot.postedTo)
        if try row.blob(1, "message.conversation") != conversation || row.flag(2, "message.isUnread") != unread {
            try db.cachedStatement(sql: "UPDATE message SET conversation = ?, isUnread = ? WHERE number = ?")
                .execute(arguments: [conversation, unread, number])
        }
        switch statuses {
        case .none: break
        case .whole: try writeStatuses(of: snapshot, number: number, replacing: true)
        case .changed(let before): try writeStatuses(of: snapshot, number: number, changedFrom: before)
        }
    }

    private func writeStatuses(of snapshot: MessageSnapshot, number: Int64, changedFrom before: [UserID: RecipientStatus]) throws {
        for (user, status) in snapshot.recipientStatus where before[user] != status {
            let statement = try db.cachedStatement(sql: before[user] == nil
                ? "INSERT INTO receipt (message, recipient, status) VALUES (?, ?, ?)"
                : "UPDATE receipt SET status = ? WHERE message = ? AND recipient = ?")
            try statement.execute(db) { row in
                if before[user] == nil {
                    row.bind(1, number)
                    row.bind(2, blob: user.bytes)
                    row.bind(3, status.rawValue)
                } else {
                    row.bind(1, status.rawValue)
                    row.bind(2, number)
                    row.bind(3, blob: user.bytes)
                }
            }
        }
        let delete = try db.cachedStatement(sql: "DELETE FROM receipt WHERE message = ? AND recipient = ?")
        for user in before.keys where snapshot.recipientStatus[user] == nil {
            try delete.execute(db) { row in
                row.bind(1, number)
                row.bind(2, blob: user.bytes)
            }
        }
    }

    /// `fresh`: the message row is new, so it has no receipt rows yet.
    private func writeStatuses(of snapshot: MessageSnapshot, number: Int64, replacing: Bool, fresh: Bool = false) throws {
        if replacing {
            try db.cachedStatement(sql: "DELETE FROM receipt WHERE message = ?").execute(arguments: [number])
        }
        let insert = try db.cachedStatement(sql: replacing || fresh
            ? "INSERT INTO receipt (message, recipient, status) VALUES (?, ?, ?)"
            : "INSERT OR REPLACE INTO receipt (message, recipient, status) VALUES (?, ?, ?)")
        for (user, status) in snapshot.recipientStatus {
            try insert.execute(db) { row in
                row.bind(1, number)
                row.bind(2, blob: user.bytes)
                row.bind(3, status.rawValue)
            }
        }
    }

    private func refreshUnreadFlags(in conversation: ConversationID) throws {
        let rows = try Row.fetchAll(
            db.cached("SELECT id, postedTo, isUnread FROM message WHERE conversation = ?"),
            arguments: [Data(conversation.bytes)])
        let update = try db.cachedStatement(sql: "UPDATE message SET isUnread = ? WHERE id = ?")
        for row in rows {
            let id = try row.operationID(0, "message.id")
            let postedTo = try row.conversationID(1, "message.postedTo")
            let unread = replica.isUnread(id, postedTo: postedTo)
            if try unread != row.flag(2, "message.isUnread") { try update.execute(arguments: [unread, Data(id.bytes)]) }
        }
    }

    // MARK: - Outbox

    static let insertOutboxSQL = """
        INSERT OR IGNORE INTO outbox (message, conversation, createdAt, expiresAt, attempts, state, reason)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        """

    /// Writes the entries an outbox lacks; returns the messages of those written waiting.
    @discardableResult
    func insert(outbox entries: [OutboxEntry]) throws -> Set<OperationID> {
        let insert = try db.cachedStatement(sql: Self.insertOutboxSQL)
        var waiting: Set<OperationID> = []
        for entry in entries {
            try insert.execute(db) { row in
                row.bind(1, blob: entry.message.bytes)
                row.bind(2, blob: entry.conversation.bytes)
                row.bind(3, Int64(clamping: entry.createdAt))
                row.bind(4, Int64(clamping: entry.expiresAt))
                row.bind(5, Int64(entry.attempts))
                row.bind(6, entry.state.column)
                row.bind(7, entry.state.reason)
            }
            if db.changesCount == 1, entry.state == .waiting { waiting.insert(entry.message) }
        }
        return waiting
    }
}

extension HLCTimestamp {
    /// The raw value's bit pattern as an INTEGER (see `Schema`).
    var databaseValue: Int64 { Int64(bitPattern: rawValue) }

    init(databaseValue: Int64) { self.init(rawValue: UInt64(bitPattern: databaseValue)) }
}

extension OutboxEntry.State {
    var column: String {
        switch self {
        case .waiting: "waiting"
        case .sent: "sent"
        case .failed: "failed"
        }
    }

    var reason: String? {
        if case .failed(let reason) = self { reason } else { nil }
    }
}
