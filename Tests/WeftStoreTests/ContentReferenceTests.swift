import Foundation
import GRDB
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

/// Which held messages refer to which content (`content_reference`, SPEC.md §11.1, §11.2):
/// what content retention keeps, and what a node starting wants.
@Suite("Store: content references")
struct ContentReferenceTests {
    static let now: UInt64 = 1_800_000_000_000

    static func descriptor() throws -> ContentDescriptor {
        var bytes = [UInt8](repeating: 0, count: ContentRoot.byteCount)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        return try ContentDescriptor(byteCount: 70_000, chunkLog: 14, root: try #require(ContentRoot(bytes: bytes)))
    }

    static func text(_ text: String) -> MessagePart { MessagePart(mimeType: "text/plain", data: Array(text.utf8)) }

    static func message(_ descriptors: [ContentDescriptor], mimeType: String = "image/png") -> OperationBody {
        .postMessage(parts: [Self.text("look")] + descriptors.map { MessagePart(mimeType: mimeType, content: $0) }, options: .init())
    }

    @Test("message parts are found by root in the local user's logs and relayed ones; pruning and expiry drop them, and a root two messages name stays while either is held")
    func followsTheLog() async throws {
        let local = NodeIdentity.generate()
        let store = try Store(directory: nil, localUser: local.publicKey)
        let author = try LocalAuthor(store: store, identity: local, wallClock: { Self.now })
        var peer = Author(identity: .generate())
        let other = NodeIdentity.generate().publicKey
        let (shared, onlyOld, onlyNew, own, pending, never) = (
            try Self.descriptor(), try Self.descriptor(), try Self.descriptor(), try Self.descriptor(), try Self.descriptor(),
            try Self.descriptor())

        // Two relayed conversations: an old one naming `shared` twice and `onlyOld`, a recent one
        // naming `shared` and `onlyNew`.
        var world = Replica(localUser: nil)
        let old = peer.createConversation(with: [other], distinct: false, in: world, wallMilliseconds: Self.now - 60_000)
        _ = world.apply(verified: [old])
        let oldMessage = peer.write(
            Self.message([shared, onlyOld, shared]), in: old.operation.conversation, replica: world, wallMilliseconds: Self.now - 59_000)
        _ = world.apply(verified: [oldMessage])
        let recent = peer.createConversation(with: [other], distinct: false, in: world, wallMilliseconds: Self.now - 1_000)
        _ = world.apply(verified: [recent])
        let recentMessage = peer.write(
            Self.message([onlyNew, shared], mimeType: "video/mp4"), in: recent.operation.conversation, replica: world,
            wallMilliseconds: Self.now - 1_000)
        _ = world.apply(verified: [recentMessage])
        // A message of the recent log whose cause never arrives: it waits, pending.
        let missing = peer.write(Self.message([]), in: recent.operation.conversation, replica: world, wallMilliseconds: Self.now - 900)
        _ = world.apply(verified: [missing])
        let waiting = peer.write(
            Self.message([pending]), in: recent.operation.conversation, replica: world, wallMilliseconds: Self.now - 800)
        let applied = try await author.receive([old, oldMessage, recent, recentMessage, waiting])
        #expect(applied.pendingCount == 1)
        // The local user's own.
        let mine = try await author.createConversation(with: [other], distinct: false).conversation
        _ = try await author.post([MessagePart(mimeType: "application/pdf", content: own)], in: mine)

        let all = [shared, onlyOld, onlyNew, own, pending, never].map(\.root)
        #expect(try await store.fetchReferencedContent(among: all) == Set(all.dropLast()), "every held message, relayed and pending too")

        // Paged by root, each root once with every part naming it.
        var pages: [[ContentReference]] = []
        var after: ContentRoot?
        while case let page = try await store.fetchContentReferences(after: after, limit: 2), let last = page.last {
            #expect(page.count <= 2)
            pages.append(page)
            after = last.root
        }
        let references = pages.flatMap { $0 }
        #expect(references.map(\.root) == Set(all.dropLast()).sorted())
        let sharedUses = try #require(references.first { $0.root == shared.root }?.uses)
        #expect(sharedUses.count == 2, "one use a message, however many parts name it")
        #expect(Set(sharedUses.map(\.conversation)) == [old.operation.conversation, recent.operation.conversation])
        #expect(Set(sharedUses.map(\.mimeType)) == ["image/png", "video/mp4"])
        #expect(sharedUses.allSatisfy { $0.descriptor == shared })
        #expect(references.first { $0.root == own.root }?.uses.map(\.conversation) == [mine])

        // Pruning the old log: what only it named is no longer referenced; `shared` still is.
        #expect(try await store.pruneRelayed(olderThan: Self.now - 30_000) == 1)
        #expect(try await store.fetchReferencedContent(among: all) == [shared.root, onlyNew.root, own.root, pending.root])
        // The pending message expires.
        #expect(try await store.expirePending(olderThan: Self.now) == [waiting.id])
        #expect(try await store.fetchReferencedContent(among: all) == [shared.root, onlyNew.root, own.root])
        // The recent log goes too: only the local user's content is left.
        #expect(try await store.pruneRelayed(olderThan: Self.now) == 1)
        #expect(try await store.fetchReferencedContent(among: all) == [own.root])
        let rows = try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM content_reference") }
        #expect(rows == 1)
    }

    @Test("a store written before the references existed gets them from the migration")
    func migrationFillsThem() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("weft-references-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = NodeIdentity.generate()
        let store = try Store(directory: directory, localUser: local.publicKey)
        let author = try LocalAuthor(store: store, identity: local, wallClock: { Self.now })
        let (first, second) = (try Self.descriptor(), try Self.descriptor())
        let conversation = try await author.createConversation(with: [NodeIdentity.generate().publicKey], distinct: false).conversation
        _ = try await author.post([MessagePart(mimeType: "image/png", content: first)], in: conversation)
        _ = try await author.post([Self.text("inline only")], in: conversation)
        _ = try await author.post([MessagePart(mimeType: "image/png", content: second), Self.text("and text")], in: conversation)
        let before = try await store.fetchContentReferences(after: nil, limit: 10)
        #expect(before.count == 2)

        // Back to the schema before: the table, its trigger and the migration's record gone.
        try await store.database.write { db in
            try db.execute(sql: """
                DROP TRIGGER content_reference_follows_operation; DROP TABLE content_reference;
                DELETE FROM grdb_migrations WHERE identifier = 'v8: content references';
                """)
        }
        let reopened = try Store(directory: directory, localUser: local.publicKey)
        #expect(try await reopened.fetchContentReferences(after: nil, limit: 10) == before)
    }
}
