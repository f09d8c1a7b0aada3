import Foundation
import GRDB
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

/// A value of the wrong type where the store reads an integer, a flag, text or bytes (written
/// by another program through raw SQL) makes the read throw `damagedStore` naming the column;
/// GRDB's `row[n]` would trap on it in a fetched row (and read TEXT as 0 from a cursor). At
/// least one test per file whose reads were converted to the checked helpers.
@Suite("Store: a value of the wrong type in a column throws damagedStore naming the column")
struct DamagedColumnTests {
    static let now: UInt64 = 1_700_000_000_000

    /// A store on disk with one conversation (with metadata) between the local user and a
    /// peer, the local user's message (in the outbox, with notification text, failed for the
    /// peer) and the peer's reply.
    struct Fixture {
        let directory: TemporaryDirectory
        let store: Store
        let author: LocalAuthor
        var peer: Author
        let conversation: ConversationID
        let mine: OperationID

        init() async throws {
            directory = try TemporaryDirectory()
            let identity = NodeIdentity.generate()
            peer = Author(identity: .generate())
            store = try Store(directory: directory.url, localUser: identity.publicKey)
            author = try LocalAuthor(store: store, identity: identity, wallClock: { DamagedColumnTests.now })
            (conversation, _) = try await author.createConversation(with: [peer.user], metadata: ["title": "plans"])
            mine = try await author.post(
                [MessagePart(mimeType: "text/plain", data: [1])], options: MessageOptions(notificationText: "new"), in: conversation
            ).id
            try await store.failDelivery(of: mine, reason: .rejected("full"), wallMilliseconds: DamagedColumnTests.now)
            let reply = peer.write(
                .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [2])], options: .init()), in: conversation,
                replica: try store.replica, wallMilliseconds: DamagedColumnTests.now + 1)
            _ = try await author.receive([reply])
        }

        /// Runs `sql` the way another program would: through its own connection to the file,
        /// with foreign keys and CHECK constraints off.
        func damage(_ sql: String) async throws {
            var configuration = Configuration()
            configuration.foreignKeysEnabled = false
            let raw = try DatabaseQueue(path: directory.url.appendingPathComponent(Store.fileName).path, configuration: configuration)
            try await raw.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA ignore_check_constraints = ON")
                try db.execute(sql: sql)
            }
        }

        /// Another store over the same file (it reads the file afresh: no replica in memory).
        func reopened() throws -> Store { try Store(directory: directory.url, localUser: store.localUser) }

        /// The peer's operation marking the local user's message read.
        mutating func peerReads() throws -> SignedOperation {
            peer.write(.read([mine]), in: conversation, replica: try store.replica, wallMilliseconds: DamagedColumnTests.now + 2)
        }
    }

    /// Expects `body` to throw `damagedStore` naming `column`, with `problem` in the message.
    static func expectDamaged(
        _ column: String, _ problem: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async {
        let error = await #expect(throws: StoreError.self, "\(what)", sourceLocation: sourceLocation) { try await body() }
        #expect(error?.code == .damagedStore, "\(what): \(error?.message ?? "no error")", sourceLocation: sourceLocation)
        #expect(
            error?.message.contains("\(column) \(problem)") == true, "\(what): \(error?.message ?? "no error")",
            sourceLocation: sourceLocation)
    }

    // MARK: - Outbox.swift

    @Test("the outbox: text in attempts, a negative count, bytes in createdAt and in state")
    func outbox() async throws {
        let fixture = try await Fixture()
        try await fixture.damage("UPDATE outbox SET attempts = 'many'")
        await Self.expectDamaged("outbox.attempts", "holds text, not an integer", "the waiting entries") { _ = try fixture.store.outbox() }
        await Self.expectDamaged("outbox.attempts", "holds text, not an integer", "the waiting entries, async") {
            _ = try await fixture.store.fetchOutbox()
        }
        try await fixture.damage("UPDATE outbox SET attempts = -1")
        await Self.expectDamaged("outbox.attempts", "holds -1, not a count", "every entry") { _ = try fixture.store.outboxEntries() }
        try await fixture.damage("UPDATE outbox SET attempts = 0, createdAt = x'0102'")
        await Self.expectDamaged("outbox.createdAt", "holds 2 bytes, not an integer", "every entry") { _ = try fixture.store.outboxEntries() }
        // Bytes, not a number: the column's TEXT affinity would store 7 as the text '7'.
        try await fixture.damage("UPDATE outbox SET createdAt = 0, state = x'07'")
        await Self.expectDamaged("outbox.state", "holds 1 bytes, not text", "marking it sent") {
            try await fixture.store.markSent(fixture.mine)
        }
    }

    // MARK: - LogSummaryTable.swift

    @Test("log summaries: text in operationCount, bytes in a head, a flag that is neither 0 nor 1 met by a write, text in a scanned timestamp")
    func logSummaries() async throws {
        let counted = try await Fixture()
        try await counted.damage("UPDATE log_summary SET operationCount = 'lots'")
        await Self.expectDamaged("log_summary.operationCount", "holds text, not an integer", "the summaries") {
            _ = try counted.store.logSummaries()
        }
        await Self.expectDamaged("log_summary.operationCount", "holds text, not an integer", "the summaries, async") {
            _ = try await counted.store.fetchLogSummaries()
        }

        let headed = try await Fixture()
        try await headed.damage("UPDATE log_head SET head = x'01'")
        await Self.expectDamaged("log_head.head", "holds 1 bytes, not an integer", "the summaries") { _ = try headed.store.logSummaries() }

        var flagged = try await Fixture()
        try await flagged.damage("UPDATE log_summary SET isPruned = 2")
        let read = try flagged.peerReads()
        await Self.expectDamaged("log_summary.isPruned", "holds 2, not a boolean", "a write adding to the log's summary") {
            _ = try await flagged.author.receive([read])
        }

        let scanned = try await Fixture()
        try await scanned.damage("UPDATE operation SET timestamp = 'late'")
        await Self.expectDamaged("operation.timestamp", "holds text, not an integer", "a scan of the operation table") {
            _ = try scanned.store.database.read { db in try LogSummaryTable.scan(db) }
        }
    }

    // MARK: - ConversationQueries.swift, MessageQueries.swift

    /// Each damage a conversation or message read meets, and what the error says.
    static let readingDamages: [(sql: String, column: String, problem: String)] = [
        ("UPDATE conversation SET messageCount = 'many'", "conversation.messageCount", "holds text, not an integer"),
        ("UPDATE conversation SET unreadCount = -3", "conversation.unreadCount", "holds -3, not a count"),
        ("UPDATE conversation SET createdAt = NULL", "conversation.createdAt", "is NULL"),
        ("UPDATE conversation SET isDistinct = 'yes'", "conversation.isDistinct", "holds text, not an integer"),
        ("UPDATE conversation SET lastMessageAt = 1.5", "conversation.lastMessageAt", "holds a real number, not an integer"),
        ("UPDATE metadata SET value = x'00'", "metadata.value", "holds 1 bytes, not text"),
        ("UPDATE message SET sentAt = 'noon'", "message.sentAt", "holds text, not an integer"),
        // Bytes, not numbers, in TEXT columns: their affinity would store a number as text.
        ("UPDATE message SET notificationText = x'05'", "message.notificationText", "holds 1 bytes, not text"),
        ("UPDATE part SET mimeType = x'0000'", "part.mimeType", "holds 2 bytes, not text"),
        ("UPDATE part SET data = 9", "part.data", "holds an integer, not bytes"),
        ("UPDATE receipt SET status = 'read'", "receipt.status", "holds text, not an integer"),
        ("UPDATE operation SET wire = 42", "operation.wire", "holds an integer, not bytes"),
        ("UPDATE operation SET status = x'00'", "operation.status", "holds 1 bytes, not text"),
    ]

    @Test("conversations, messages, the log and its counts", arguments: readingDamages.indices)
    func reading(index: Int) async throws {
        let (sql, column, problem) = Self.readingDamages[index]
        let fixture = try await Fixture()
        try await fixture.damage(sql)
        let store = fixture.store
        switch column.split(separator: ".")[0] {
        case "conversation", "metadata":
            await Self.expectDamaged(column, problem, "a conversation after \(sql)") { _ = try store.conversation(fixture.conversation) }
            await Self.expectDamaged(column, problem, "a query after \(sql)") { _ = try store.conversations(ConversationQuery()) }
            await Self.expectDamaged(column, problem, "an async query after \(sql)") { _ = try await store.fetchConversations(ConversationQuery()) }
        case "operation" where column == "operation.wire":
            await Self.expectDamaged(column, problem, "a log after \(sql)") { _ = try store.operations(in: fixture.conversation) }
        case "operation":
            await Self.expectDamaged(column, problem, "the counts after \(sql)") { _ = try store.operationCounts() }
        default:
            await Self.expectDamaged(column, problem, "a message after \(sql)") { _ = try store.message(fixture.mine) }
            await Self.expectDamaged(column, problem, "a query after \(sql)") { _ = try store.messages(MessageQuery()) }
            await Self.expectDamaged(column, problem, "an async query after \(sql)") { _ = try await store.fetchMessages(MessageQuery()) }
        }
    }

    // MARK: - OperationLog+Reading.swift

    @Test("operations replication reads: an integer where the wire bytes belong")
    func summaries() async throws {
        let fixture = try await Fixture()
        let store = fixture.store
        let held = try store.operations(in: fixture.conversation, beyond: VersionVector(), limit: 10)
        try await fixture.damage("UPDATE operation SET wire = 42")
        await Self.expectDamaged("operation.wire", "holds an integer, not bytes", "operations beyond heads") {
            _ = try store.operations(in: fixture.conversation, beyond: VersionVector(), limit: 10)
        }
        await Self.expectDamaged("operation.wire", "holds an integer, not bytes", "operations by identifier") {
            _ = try store.operations(ids: [fixture.mine])
        }
        await Self.expectDamaged("operation.wire", "holds an integer, not bytes", "operations beyond heads, async") {
            _ = try await store.fetchOperations(in: fixture.conversation, beyond: VersionVector(), limit: 10)
        }
        await Self.expectDamaged("operation.wire", "holds an integer, not bytes", "operations by identifier, async") {
            _ = try await store.fetchOperations(ids: [fixture.mine])
        }
        await Self.expectDamaged("operation.wire", "holds an integer, not bytes", "the removal rule, async") {
            _ = try await fixture.reopened().fetchCausalPasts(of: held)
        }
        await Self.expectDamaged("operation.wire", "holds an integer, not bytes", "the removal rule on a store without the log") {
            _ = try fixture.reopened().withheld(held, from: fixture.peer.user)
        }
    }

    // MARK: - Outbox+Acknowledgements.swift

    @Test("the unsent messages' slots, read as the store opens: text in a sequence number")
    func acknowledgements() async throws {
        let fixture = try await Fixture()
        try await fixture.damage("UPDATE operation SET sequence = 'first' WHERE id = (SELECT message FROM outbox)")
        await Self.expectDamaged("operation.sequence", "holds text, not an integer", "opening the store") { _ = try fixture.reopened() }
    }

    // MARK: - DeliveryFailures.swift

    @Test("delivery failures: bytes where the reason belongs")
    func failures() async throws {
        let fixture = try await Fixture()
        try await fixture.damage("UPDATE delivery_failure SET reason = x'6e6f'")
        await Self.expectDamaged("delivery_failure.reason", "holds 2 bytes, not text", "the failed message") {
            _ = try fixture.store.message(fixture.mine)
        }
    }

    // MARK: - OperationLog+Loading.swift

    @Test("the replica's index of creations: text where the kind belongs; the complete replica: an integer for the wire bytes")
    func loading() async throws {
        let fixture = try await Fixture()
        try await fixture.damage("UPDATE operation SET kind = 'creation'")
        let reopened = try fixture.reopened()
        // The first write through the replica builds its index of creations.
        await Self.expectDamaged("operation.kind", "holds text, not an integer", "the first write") {
            _ = try await reopened.apply(received: [], wallMilliseconds: Self.now)
        }
        try await fixture.damage("UPDATE operation SET kind = 1, wire = 42")
        await Self.expectDamaged("operation.wire", "holds an integer, not bytes", "the complete replica") { _ = try fixture.store.replica }
    }

    // MARK: - Materializer.swift

    @Test("a write updating a message row: a flag that is text")
    func materializer() async throws {
        var fixture = try await Fixture()
        try await fixture.damage("UPDATE message SET isUnread = 'maybe'")
        let read = try fixture.peerReads()
        await Self.expectDamaged("message.isUnread", "holds text, not an integer", "the peer's read receipt") {
            _ = try await fixture.author.receive([read])
        }
        #expect(try fixture.store.operationCounts() == (4, 0, 0), "the failed write left nothing")
    }
}
