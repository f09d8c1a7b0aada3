import Foundation
import Synchronization
import GRDB
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("Store: the schema's checks")
struct SchemaTests {
    static let now: UInt64 = 1_700_000_000_000

    static func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("weft-schema-\(UUID().uuidString)")
    }

    /// The statements that write a status or state column on the hot paths.
    static let writes = [
        Materializer.insertOperationSQL, Materializer.redecideOperationSQL, Materializer.insertOutboxSQL,
        "UPDATE outbox SET state = 'sent', reason = NULL WHERE message = ?",
    ]

    /// The opcodes SQLite compiles `sql` to.
    static func opcodes(_ sql: String, in db: Database) throws -> [String] {
        let statement = try db.makeStatement(sql: "EXPLAIN " + sql)
        statement.setUncheckedArguments([])  // compiling is enough: nothing is bound
        return try Row.fetchAll(statement).map { $0["opcode"] as String }
    }

    @Test("writing a status or outbox state builds no temporary table for the check (as an IN list did)")
    func noTemporaryTables() async throws {
        let store = try Store(directory: nil, localUser: NodeIdentity.generate().publicKey)
        try await store.database.read { db in
            for sql in Self.writes {
                let opcodes = try Self.opcodes(sql, in: db)
                #expect(!opcodes.contains("OpenEphemeral"), "\(sql)")
            }
        }
    }

    @Test("which messages still wait is read by their outbox keys, not through every waiting entry")
    func waitingByKey() async throws {
        let store = try Store(directory: nil, localUser: NodeIdentity.generate().publicKey)
        try await store.database.read { db in
            for count in [1, 16, 500] {
                let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + Outbox.waitingSQL(count: count), arguments: StatementArguments(
                    (0..<count).map { _ in Data(count: 32) })).map { $0["detail"] as String }
                #expect(plan.contains { $0.contains("sqlite_autoindex_outbox_1 (message=?)") }, "\(plan)")
                #expect(!plan.contains { $0.contains("outbox_on_state") }, "\(plan)")
            }
        }
    }

    @Test("the rewritten checks still refuse a status or state outside their lists")
    func checksStillRefuse() async throws {
        let store = try Store(directory: nil, localUser: NodeIdentity.generate().publicKey)
        try await store.database.write { db in
            let id = Data(repeating: 1, count: 32)
            let conversation = Data(repeating: 2, count: 16)
            #expect(throws: DatabaseError.self) {
                try db.execute(
                    sql: Materializer.insertOperationSQL,
                    arguments: [id, conversation, Data(count: 32), 1, 0, 1, Data([1]), 1, "maybe", nil])
            }
            try db.execute(
                sql: Materializer.insertOperationSQL,
                arguments: [id, conversation, Data(count: 32), 1, 0, 1, Data([1]), 1, "pending", nil])
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: Materializer.redecideOperationSQL, arguments: [2, "accepted ", nil, id])
            }
            // The outbox insert ignores conflicts, a failed check among them: no row.
            try db.execute(sql: Materializer.insertOutboxSQL, arguments: [id, conversation, 0, 1, 0, "lost", nil])
            #expect(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") == 0)
            try db.execute(sql: Materializer.insertOutboxSQL, arguments: [id, conversation, 0, 1, 0, "waiting", nil])
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: "UPDATE outbox SET state = 'gone'")
            }
        }
    }

    @Test("a store written with the IN-list checks gets the rewritten ones on opening, its rows kept")
    func migrationRewritesChecks() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let identity = NodeIdentity.generate()
        let peer = NodeIdentity.generate().publicKey
        let store = try Store(directory: directory, localUser: identity.publicKey)
        let author = try LocalAuthor(store: store, identity: identity, wallClock: { Self.now })
        let (conversation, _) = try await author.createConversation(with: [peer])
        let posted = try await author.post([MessagePart(mimeType: "text/plain", data: [1])], in: conversation)

        // Back to the v1 checks, and the migration's record gone.
        try await store.database.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA writable_schema = ON")
            for (table, check) in [
                ("operation", Schema.listCheck("status", ["accepted", "pending", "rejected"])),
                ("outbox", Schema.listCheck("state", ["waiting", "sent", "failed"])),
            ] {
                try db.execute(
                    sql: "UPDATE sqlite_schema SET sql = replace(sql, ?, ?) WHERE name = ?",
                    arguments: [check.comparisons, check.list, table])
            }
            let version = try Int.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
            try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
            try db.execute(sql: "PRAGMA writable_schema = OFF")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v4: checks without IN lists'")
            let before = try Self.opcodes(Materializer.insertOperationSQL, in: db)
            #expect(before.contains("OpenEphemeral"))
        }

        let reopened = try Store(directory: directory, localUser: identity.publicKey)
        try await reopened.database.read { db in
            for sql in Self.writes {
                let opcodes = try Self.opcodes(sql, in: db)
                #expect(!opcodes.contains("OpenEphemeral"), "\(sql)")
            }
            let integrity = try String.fetchOne(db, sql: "PRAGMA integrity_check")
            #expect(integrity == "ok")
        }
        #expect(try reopened.outbox().map(\.message) == [posted.id])
        #expect(try reopened.message(posted.id)?.conversation == conversation)
    }
}

@Suite("Store: which commits wait for the disk")
struct SyncingTests {
    /// The writer connection's `PRAGMA synchronous`: 2 is FULL, 1 NORMAL.
    static func writerSynchronous(_ store: Store) async throws -> Int? {
        try await store.database.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
    }

    @Test("a write that does not sync runs at NORMAL, and the writer syncs every commit after it again (marking messages sent among them)")
    func markSentDoesNotSync() async throws {
        let directory = SchemaTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let identity = NodeIdentity.generate()
        let store = try Store(directory: directory, localUser: identity.publicKey)
        let author = try LocalAuthor(store: store, identity: identity, wallClock: { SchemaTests.now })
        let (conversation, _) = try await author.createConversation(with: [NodeIdentity.generate().publicKey])
        let posted = try await author.post([MessagePart(mimeType: "text/plain", data: [1])], in: conversation)
        #expect(try await Self.writerSynchronous(store) == 2)

        let observed = Mutex<Int?>(nil)
        try await store.transactions.write(syncing: false) { db in
            observed.withLock { $0 = try? Int.fetchOne(db, sql: "PRAGMA synchronous") }
            return ((), Publication())
        }
        #expect(observed.withLock { $0 } == 1)
        #expect(try await store.markSent(among: [posted.id]) == [posted.id])
        #expect(try await Self.writerSynchronous(store) == 2)
        #expect(try store.outbox().isEmpty)
    }
}
