import Foundation
import GRDB
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

@Suite("Store: a damaged database gives a clear error, never a crash")
struct DamagedStoreTests {
    static let now: UInt64 = 1_700_000_000_000

    /// A store on disk with one conversation, one message from the local user (in the outbox)
    /// and one from the peer.
    static func store(in directory: URL) async throws -> (Store, LocalAuthor, ConversationID, OperationID) {
        let identity = NodeIdentity.generate()
        var peer = Author(identity: .generate())
        let store = try Store(directory: directory, localUser: identity.publicKey)
        let author = try LocalAuthor(store: store, identity: identity, wallClock: { Self.now })
        let (conversation, _) = try await author.createConversation(with: [peer.user])
        let mine = try await author.post([MessagePart(mimeType: "text/plain", data: [1])], in: conversation)
        let reply = peer.write(
            .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [2])], options: .init()), in: conversation,
            replica: try store.replica, wallMilliseconds: Self.now + 1)
        _ = try await author.receive([reply])
        return (store, author, conversation, mine.id)
    }

    /// Each damage (raw SQL writing a 3-byte value where an identifier or key belongs), and the
    /// column the error must name.
    static let damages: [(sql: String, column: String)] = [
        ("UPDATE message SET sender = x'010203'", "message.sender"),
        ("UPDATE message SET postedTo = x'010203'", "message.postedTo"),
        ("UPDATE participant SET user = x'010203' WHERE user = (SELECT MIN(user) FROM participant)", "participant.user"),
        ("UPDATE receipt SET recipient = x'010203'", "receipt.recipient"),
        ("UPDATE conversation SET creator = x'010203'", "conversation.creator"),
        ("UPDATE outbox SET message = x'010203'", "outbox.message"),
    ]

    @Test("a 3-byte identifier or key written through raw SQL: reads and writes that meet it throw damagedStore naming the column", arguments: damages.indices)
    func damagedRow(index: Int) async throws {
        let (sql, column) = Self.damages[index]
        let directory = try TemporaryDirectory()
        let (store, author, conversation, mine) = try await Self.store(in: directory.url)
        // Damaged the way another program would: through its own connection to the file.
        do {
            var configuration = Configuration()
            configuration.foreignKeysEnabled = false
            let raw = try DatabaseQueue(path: directory.url.appendingPathComponent(Store.fileName).path, configuration: configuration)
            try await raw.write { db in try db.execute(sql: sql) }
        }
        func expectDamaged(_ what: String, _ body: () async throws -> Void) async {
            let error = await #expect(throws: StoreError.self, "\(what) after \(sql)") { try await body() }
            #expect(error?.code == .damagedStore, "\(what) after \(sql)")
            #expect(error?.message.contains("\(column) holds 3 bytes") == true, "\(what): \(error?.message ?? "no error")")
        }
        switch column {
        case "outbox.message":
            await expectDamaged("the outbox") { _ = try store.outbox() }
        case "participant.user", "conversation.creator":
            await expectDamaged("a conversation") { _ = try store.conversation(conversation) }
            await expectDamaged("a query") { _ = try store.conversations(ConversationQuery()) }
            // A write reads the conversation's row for its change set: the read error is
            // thrown, not taken for "no row".
            await expectDamaged("a write") { _ = try await author.post([MessagePart(mimeType: "text/plain", data: [3])], in: conversation) }
            #expect(try store.operationCounts() == (4, 0, 0), "the failed write left nothing")
        default:
            await expectDamaged("a message") { _ = try store.message(mine) }
            await expectDamaged("a query") { _ = try store.messages(MessageQuery()) }
        }
    }
}
