import GRDB

/// The SQLite schema, as named migrations. A migration that shipped is never edited: a change
/// is a new migration after it.
///
/// Identifiers and keys are BLOBs (SQLite compares BLOBs with memcmp, which is the byte order
/// the model sorts by). HLC timestamps are INTEGERs holding the raw 64-bit value's bit pattern:
/// they order correctly below 2^63, which holds for every timestamp the store accepts (a peer's
/// operation more than the tolerance ahead of the wall clock is refused on receipt).
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()

        migrator.registerMigration("v1") { db in
            // The store's own facts: the local user the unread flags are computed for.
            try db.execute(sql: """
                CREATE TABLE setting (
                    key TEXT PRIMARY KEY NOT NULL,
                    value BLOB NOT NULL
                ) WITHOUT ROWID;
                """)

            // Every operation the replica was given: accepted, pending (causes missing) and
            // rejected by the merge rules (with the reason). Operations refused on receipt (bad
            // signature, timestamp from the future) are not stored. `appliedOrder` grows with
            // every decision, so replaying the log by it rebuilds the replica, and the accepted
            // operations of a conversation in that order respect causality.
            try db.execute(sql: """
                CREATE TABLE operation (
                    id BLOB PRIMARY KEY NOT NULL,
                    conversation BLOB NOT NULL,
                    author BLOB NOT NULL,
                    sequence INTEGER NOT NULL,
                    timestamp INTEGER NOT NULL,
                    kind INTEGER NOT NULL,
                    wire BLOB NOT NULL,
                    appliedOrder INTEGER NOT NULL UNIQUE,
                    status TEXT NOT NULL CHECK (status IN ('accepted', 'pending', 'rejected')),
                    reason TEXT
                );
                CREATE INDEX operation_on_conversation ON operation(conversation, status, appliedOrder);
                """)

            // Conversations as readers see them. A canonical conversation has `canonical = id`
            // and every column filled; a conversation merged into another keeps a row whose
            // `canonical` names the conversation it resolves to, and NULL elsewhere.
            try db.execute(sql: """
                CREATE TABLE conversation (
                    id BLOB PRIMARY KEY NOT NULL,
                    canonical BLOB NOT NULL,
                    creator BLOB,
                    createdAt INTEGER,
                    isDistinct BOOLEAN,
                    messageCount INTEGER,
                    unreadCount INTEGER,
                    lastMessageAt INTEGER
                );
                CREATE INDEX conversation_on_canonical ON conversation(canonical);

                CREATE TABLE participant (
                    conversation BLOB NOT NULL REFERENCES conversation(id) ON DELETE CASCADE,
                    user BLOB NOT NULL,
                    PRIMARY KEY (conversation, user)
                ) WITHOUT ROWID;
                CREATE INDEX participant_on_user ON participant(user);

                CREATE TABLE metadata (
                    conversation BLOB NOT NULL REFERENCES conversation(id) ON DELETE CASCADE,
                    key TEXT NOT NULL,
                    value TEXT NOT NULL,
                    PRIMARY KEY (conversation, key)
                ) WITHOUT ROWID;
                """)

            // Messages in their canonical conversation. No position column: a position would
            // have to be rewritten for every later message on each insert before it; readers
            // count over the order index instead (SPEC.md §13.5 order: sentAt, sender, id).
            // Parts and receipts refer to a message by its row number, which grows with each
            // insert, so their B-trees are written at the end rather than at random places.
            try db.execute(sql: """
                CREATE TABLE message (
                    number INTEGER PRIMARY KEY,
                    id BLOB NOT NULL UNIQUE,
                    conversation BLOB NOT NULL REFERENCES conversation(id) DEFERRABLE INITIALLY DEFERRED,
                    postedTo BLOB NOT NULL REFERENCES conversation(id) DEFERRABLE INITIALLY DEFERRED,
                    sender BLOB NOT NULL,
                    sentAt INTEGER NOT NULL,
                    isUnread BOOLEAN NOT NULL,
                    notificationText TEXT,
                    notificationSound TEXT
                );
                CREATE INDEX message_on_conversation_order ON message(conversation, sentAt, sender, id);

                CREATE TABLE part (
                    message INTEGER NOT NULL REFERENCES message(number) ON DELETE CASCADE,
                    "index" INTEGER NOT NULL,
                    mimeType TEXT NOT NULL,
                    data BLOB NOT NULL,
                    PRIMARY KEY (message, "index")
                );

                CREATE TABLE receipt (
                    message INTEGER NOT NULL REFERENCES message(number) ON DELETE CASCADE,
                    recipient BLOB NOT NULL,
                    status INTEGER NOT NULL,
                    PRIMARY KEY (message, recipient)
                ) WITHOUT ROWID;
                """)

            // Messages accepted for sending: they survive crashes until sent or failed.
            try db.execute(sql: """
                CREATE TABLE outbox (
                    message BLOB PRIMARY KEY NOT NULL,
                    conversation BLOB NOT NULL,
                    createdAt INTEGER NOT NULL,
                    expiresAt INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    state TEXT NOT NULL CHECK (state IN ('waiting', 'sent', 'failed')),
                    reason TEXT
                );
                CREATE INDEX outbox_on_state ON outbox(state, createdAt);
                """)
        }

        // Each log's summary as replication sees it (LogSummaryTable, SPEC.md §11.1), kept in
        // every write transaction that stores operations; filled here for a store written
        // before it existed.
        migrator.registerMigration("v2: log summaries") { db in
            try db.execute(sql: """
                CREATE TABLE log_summary (
                    conversation BLOB PRIMARY KEY NOT NULL,
                    digest BLOB NOT NULL,
                    operationCount INTEGER NOT NULL,
                    lastActivity INTEGER NOT NULL,
                    isPublished BOOLEAN NOT NULL,
                    isPruned BOOLEAN NOT NULL DEFAULT 0
                ) WITHOUT ROWID;

                CREATE TABLE log_head (
                    conversation BLOB NOT NULL,
                    author BLOB NOT NULL,
                    head INTEGER NOT NULL,
                    PRIMARY KEY (conversation, author)
                ) WITHOUT ROWID;

                CREATE TABLE log_gap (
                    conversation BLOB NOT NULL,
                    author BLOB NOT NULL,
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (conversation, author, sequence)
                ) WITHOUT ROWID;
                """)
            try LogSummaryTable.fill(db)
        }

        // Per-recipient delivery failures of the local user's messages: local facts, never
        // replicated (SPEC.md §13.6). `recipientsChecked` marks an outbox entry whose time to
        // live ran out and whose undelivered recipients got their failure.
        migrator.registerMigration("v3: delivery failures") { db in
            try db.execute(sql: """
                CREATE TABLE delivery_failure (
                    message BLOB NOT NULL,
                    recipient BLOB NOT NULL,
                    reason TEXT NOT NULL,
                    failedAt INTEGER NOT NULL,
                    PRIMARY KEY (message, recipient)
                ) WITHOUT ROWID;
                ALTER TABLE outbox ADD COLUMN recipientsChecked BOOLEAN NOT NULL DEFAULT 0;
                """)
        }

        // SQLite evaluates `CHECK (status IN ('accepted', 'pending', 'rejected'))` by filling
        // a temporary B-tree with the list on every insert and update of the row (opened,
        // created and closed each time: about a fifth of the operation insert). The same
        // check written with `=` and `OR` compares in place. Changing a CHECK that every row
        // already meets leaves the file format alone, so the table's SQL is edited in
        // sqlite_schema rather than the table copied (the procedure of SQLite's ALTER TABLE
        // page, "making other kinds of table schema changes").
        migrator.registerMigration("v4: checks without IN lists") { db in
            try rewriteChecks(
                in: db,
                [
                    ("operation", Self.listCheck("status", ["accepted", "pending", "rejected"])),
                    ("outbox", Self.listCheck("state", ["waiting", "sent", "failed"])),
                ])
        }

        // Pending operations (causes missing) are deleted when they wait too long or their log
        // holds too many (`OperationLog+Pending.swift`, SPEC.md §11.1). Partial indexes hold only the
        // rows they are about, so an honest store, with next to no pending or refused
        // operations, pays next to nothing for them on insert:
        // - by timestamp, the pending operations that expired (the sweep reads only those);
        // - by log and timestamp, a log's oldest pending operations (dropped past its limit);
        // - by slot, the operations of a log that are not accepted: with the accepted ones (a
        //   prefix of each author's chain) they give the heads and gaps of a summary after a
        //   deletion, without reading the log.
        migrator.registerMigration("v5: pending operations expire") { db in
            try db.execute(sql: """
                CREATE INDEX operation_pending_on_timestamp ON operation(timestamp) WHERE status = 'pending';
                CREATE INDEX operation_pending_on_conversation ON operation(conversation, timestamp, id) WHERE status = 'pending';
                CREATE INDEX operation_unaccepted_on_slot ON operation(conversation, author, sequence) WHERE status != 'accepted';
                """)
        }

        // v6: a rich-content part (SPEC.md §17) keeps its descriptor (41 bytes) in `content`
        // and no data; inline parts keep NULL there.
        migrator.registerMigration("v6: rich content parts") { db in
            try db.execute(sql: "ALTER TABLE part ADD COLUMN content BLOB")
        }

        // v7: each body stored once. The operation log holds every part's bytes; `part` keeps
        // the bytes of parts of at most `Materializer.loadedPartByteCount` (what a page of
        // messages carries) and the size of every part, so a larger part's bytes are read
        // from the log only when asked for.
        migrator.registerMigration("v7: part bodies once") { db in
            try db.execute(sql: """
                ALTER TABLE part ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
                UPDATE part SET size = length(data) WHERE content IS NULL;
                UPDATE part SET data = x'' WHERE content IS NULL AND length(data) > \(Materializer.loadedPartByteCount);
                """)
        }

        // v8: which held messages refer to which content (`ContentReferenceTable`, SPEC.md
        // §11.2): retention removes content no held message refers to, and a node starting
        // wants what its messages name. The `part` table cannot say: relayed logs have no state
        // rows (§14.9), and a scan of the log's wire bytes reads every message body.
        migrator.registerMigration("v8: content references") { db in
            try db.execute(sql: ContentReferenceTable.creationSQL)
            try ContentReferenceTable.fill(db)
        }

        // Future migrations go here, after "v8: content references".
        return migrator
    }

    /// A check that `column` holds one of `values`, as `IN (list)` and as its `OR` of `=`.
    static func listCheck(_ column: String, _ values: [String]) -> (list: String, comparisons: String) {
        (
            "CHECK (\(column) IN (\(values.map { "'\($0)'" }.joined(separator: ", "))))",
            "CHECK (\(values.map { "\(column) = '\($0)'" }.joined(separator: " OR ")))"
        )
    }

    /// Replaces each table's `IN (list)` check by its comparisons in the table's SQL.
    private static func rewriteChecks(in db: Database, _ checks: [(table: String, check: (list: String, comparisons: String))]) throws {
        try db.execute(sql: "PRAGMA writable_schema = ON")
        for (table, check) in checks {
            try db.execute(
                sql: "UPDATE sqlite_schema SET sql = replace(sql, ?, ?) WHERE type = 'table' AND name = ?",
                arguments: [check.list, check.comparisons, table])
            guard db.changesCount == 1 else {
                throw StoreError(.damagedStore, "the \(table) table has no row in sqlite_schema to rewrite")
            }
        }
        // A new schema version makes every connection read the edited SQL again.
        let version = try Int.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
        try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
        try db.execute(sql: "PRAGMA writable_schema = OFF")
    }
}
