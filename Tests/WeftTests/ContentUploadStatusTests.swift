import Foundation
import Testing
import Weft
import WeftControl
import WeftCrypto
import WeftModel
@testable import WeftNode
import WeftStore
import WeftTransfer

/// The status of content the local user sent (SPEC.md §15.5: awaiting upload, uploading,
/// complete), across a restart of the sending node: content sent whole stays complete, content
/// not sent whole yet is still awaited, and goes on to complete as a peer fetches it.
@Suite("upload status across a restart", .timeLimit(.minutes(3)))
struct ContentUploadStatusTests {
    typealias Harness = InProcessNodeTests
    typealias Node = ContentTransferTests.Node

    /// Where `node` says its own content stands, as `weft msgs` shows it.
    static func shown(_ descriptor: ContentDescriptor, on node: Node) -> ContentStatus {
        node.content.state(of: descriptor, sentByLocalUser: true).status
    }

    @Test("content sent whole is complete after the sender restarts; content nobody fetched yet awaits upload, then completes when fetched")
    func statusSurvivesRestart() async throws {
        let directory = try ContentTransferTests.Directory()
        let meshKey = MeshKey.generate()
        let aliceIdentity = NodeIdentity.generate()
        // One store for both runs of alice: her messages stay; her content service starts afresh.
        let aliceStore = try Store(directory: nil, localUser: aliceIdentity.publicKey)
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"), identity: aliceIdentity, store: aliceStore)
        let aliceTask = try await alice.start()
        // Bob keeps no relayed content: carol's stays unsent while she is offline.
        var participantOnly = ContentConfiguration()
        participantOnly.keepsRelayedContent = false
        let bob = try Node(
            "bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"), configuration: participantOnly)
        let bobTask = try await bob.start()
        let carolIdentity = NodeIdentity.generate()

        // One content for bob, who fetches it; one for carol, who is offline.
        let fetchedBytes = ContentTransferTests.random(300_000)
        let fetched = try await alice.content.importContent(bytes: fetchedBytes, mimeType: "application/octet-stream")
        let waiting = try await alice.content.importContent(bytes: ContentTransferTests.random(200_000), mimeType: "application/octet-stream")
        #expect(Self.shown(fetched, on: alice) == .awaitingUpload)
        let withBob = try await alice.client.createConversation(with: [bob.user])
        try await alice.client.send([MessagePart(mimeType: "application/octet-stream", content: fetched)], in: withBob.id)
        let withCarol = try await alice.client.createConversation(with: [carolIdentity.publicKey])
        try await alice.client.send([MessagePart(mimeType: "application/octet-stream", content: waiting)], in: withCarol.id)
        try await Harness.eventually("bob holds the content", within: 60) { bob.content.status(of: fetched.root) == .complete }
        try await Harness.eventually("alice sees it uploaded") { Self.shown(fetched, on: alice) == .complete }
        #expect(Self.shown(waiting, on: alice) == .awaitingUpload)
        // Added again once sent whole: still complete, and not marked as awaiting upload.
        _ = try await alice.content.importContent(bytes: fetchedBytes, mimeType: "application/octet-stream")
        #expect(Self.shown(fetched, on: alice) == .complete)
        try await Harness.eventually("only the unsent content is marked") {
            try Self.marks(in: directory.home("alice")) == ["\(waiting.root.hex).upload"]
        }

        bobTask.cancel()
        _ = await bobTask.result
        aliceTask.cancel()
        _ = await aliceTask.result

        // Alice again, on the same home.
        let aliceAgain = try Node("alice", meshKey: meshKey, home: directory.home("alice"), identity: aliceIdentity, store: aliceStore)
        let aliceAgainTask = try await aliceAgain.start()
        defer { aliceAgainTask.cancel() }
        #expect(Self.shown(fetched, on: aliceAgain) == .complete, "sent whole before the restart")
        #expect(aliceAgain.content.status(of: fetched.root) == .complete)
        try await Harness.eventually("alice still awaits the upload of carol's content") {
            Self.shown(waiting, on: aliceAgain) == .awaitingUpload
        }

        // Carol comes and fetches hers: it completes.
        let carol = try Node(
            "carol", meshKey: meshKey, peers: [try #require(aliceAgain.address)], home: directory.home("carol"), identity: carolIdentity)
        let carolTask = try await carol.start()
        defer { carolTask.cancel() }
        try await Harness.eventually("carol holds her content", within: 60) { carol.content.status(of: waiting.root) == .complete }
        try await Harness.eventually("alice sees carol's content uploaded") { Self.shown(waiting, on: aliceAgain) == .complete }
        carolTask.cancel()
        _ = await carolTask.result
        aliceAgainTask.cancel()
        _ = await aliceAgainTask.result

        // And once more: both stay complete.
        let aliceThird = try Node("alice", meshKey: meshKey, home: directory.home("alice"), identity: aliceIdentity, store: aliceStore)
        let aliceThirdTask = try await aliceThird.start()
        defer { aliceThirdTask.cancel() }
        #expect(Self.shown(fetched, on: aliceThird) == .complete)
        #expect(Self.shown(waiting, on: aliceThird) == .complete)
        #expect(try Self.marks(in: directory.home("alice")).isEmpty, "no content awaits upload")
    }

    /// The `ROOT.upload` files in a home's `content/`.
    static func marks(in home: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: home.appendingPathComponent("content").path).filter { $0.hasSuffix(".upload") }
    }

    @Test("content added and never sent is marked while it awaits upload; a mark whose content is gone is removed when the node starts")
    func marks() async throws {
        let directory = try ContentTransferTests.Directory()
        let meshKey = MeshKey.generate()
        let identity = NodeIdentity.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"), identity: identity)
        let aliceTask = try await alice.start()
        let descriptor = try await alice.content.importContent(bytes: ContentTransferTests.random(50_000), mimeType: "application/octet-stream")
        try await Harness.eventually("the content is marked") { try Self.marks(in: directory.home("alice")) == ["\(descriptor.root.hex).upload"] }
        aliceTask.cancel()
        _ = await aliceTask.result

        // A mark left for content removed meanwhile (and one for content that never was).
        let contentDirectory = directory.home("alice").appendingPathComponent("content")
        try FileManager.default.removeItem(at: contentDirectory.appendingPathComponent(descriptor.root.hex))
        let stray = String(repeating: "ab", count: 32) + ".upload"
        #expect(FileManager.default.createFile(atPath: contentDirectory.appendingPathComponent(stray).path, contents: nil))
        let again = try Node("alice", meshKey: meshKey, home: directory.home("alice"), identity: identity)
        let againTask = try await again.start()
        defer { againTask.cancel() }
        try await Harness.eventually("the marks are gone") { try Self.marks(in: directory.home("alice")).isEmpty }
        #expect(again.content.status(of: descriptor.root) == .readyForDownload)
    }

    @Test("the upload mark is made before the content is named: content that cannot be marked is not added, and nothing is named")
    func markBeforeName() async throws {
        let directory = try ContentTransferTests.Directory()
        let alice = try Node("alice", meshKey: MeshKey.generate(), home: directory.home("alice"))
        let aliceTask = try await alice.start()
        defer { aliceTask.cancel() }
        let bytes = ContentTransferTests.random(40_000)
        let root = try ContentManifestBuilder.manifest(of: bytes).root
        // A directory where the mark goes: creating the mark fails (even for root).
        let contentDirectory = directory.home("alice").appendingPathComponent("content")
        try FileManager.default.createDirectory(at: contentDirectory.appendingPathComponent("\(root.hex).upload"), withIntermediateDirectories: true)
        await #expect(throws: ContentServiceError.self) {
            try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream")
        }
        #expect(!FileManager.default.fileExists(atPath: contentDirectory.appendingPathComponent(root.hex).path), "the content is not named")
        #expect(alice.content.status(of: root) != .complete && alice.content.status(of: root) != .awaitingUpload)
    }
}
