import Foundation
import Testing
import Weft
import WeftCrypto
import WeftModel
@testable import WeftNode
import WeftStore

/// What a node fetches by itself (`ContentConfiguration`): with participant content on
/// demand, only parts of the MIME types configured (or small ones); the rest on demand.
@Suite("automatic downloads by size and MIME type", .timeLimit(.minutes(3)))
struct AutomaticDownloadTests {
    typealias Harness = InProcessNodeTests
    typealias Node = ContentTransferTests.Node

    @Test("on demand with image/* fetched automatically: an image/png part arrives by itself, an application/octet-stream part of the same size only once asked for")
    func byMIMEType() async throws {
        let directory = try ContentTransferTests.Directory()
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        var configuration = ContentConfiguration()
        configuration.downloadsParticipantContent = false
        configuration.automaticDownloadTypes = [try #require(MediaTypePattern("image/*"))]
        let bob = try Node("bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"), configuration: configuration)
        let bobTask = try await bob.start()
        defer {
            aliceTask.cancel()
            bobTask.cancel()
        }
        try await Harness.eventually("connected") { alice.node.node.connectedPeers == [bob.node.node.identity] }

        let image = ContentTransferTests.random(200_000)
        let other = ContentTransferTests.random(200_000)
        let small = ContentTransferTests.random(2000)
        let imageContent = try await alice.content.importContent(bytes: image, mimeType: "image/png")
        let otherContent = try await alice.content.importContent(bytes: other, mimeType: "application/octet-stream")
        let smallContent = try await alice.content.importContent(bytes: small, mimeType: "application/octet-stream")
        let conversation = try await alice.client.createConversation(with: [bob.user])
        // The octet-stream part first: had it been fetched, it would have been asked for first.
        let sent = try await alice.client.send(
            [
                MessagePart(mimeType: "application/octet-stream", content: otherContent), MessagePart(mimeType: "image/png", content: imageContent),
                MessagePart(mimeType: "application/octet-stream", content: smallContent),
            ], in: conversation.id)

        try await Harness.eventually("bob holds the image", within: 60) { bob.content.status(of: imageContent.root) == .complete }
        try await Harness.eventually("bob holds the small part (within the 2048-byte limit)", within: 60) {
            bob.content.status(of: smallContent.root) == .complete
        }
        #expect(ContentTransferTests.held(imageContent.root, on: bob) == image)
        #expect(bob.content.status(of: otherContent.root) == .readyForDownload, "on demand: \(bob.content.status(of: otherContent.root))")
        #expect(bob.content.contentFile(otherContent.root) == nil)
        #expect(alice.content.statistics.chunksServed == imageContent.chunkCount + smallContent.chunkCount, "nothing of the other asked for")
        #expect(alice.content.status(of: otherContent.root) == .awaitingUpload)

        // Asked for: it comes.
        let progress = try await bob.client.contentProgress(ofPart: 0, in: sent.id)
        try await bob.client.downloadContent(ofPart: 0, in: sent.id)
        var last: ContentProgress?
        for try await value in progress { last = value }
        #expect(last?.fraction == 1.0)
        #expect(ContentTransferTests.held(otherContent.root, on: bob) == other)
        try await Harness.eventually("alice sees it uploaded") { alice.content.status(of: otherContent.root) == .complete }
    }

    @Test("a node that keeps no relayed content fetches a relayed part only if it is of a type fetched automatically")
    func relayedByMIMEType() async throws {
        let directory = try ContentTransferTests.Directory()
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        var configuration = ContentConfiguration()
        configuration.keepsRelayedContent = false
        configuration.automaticDownloadTypes = [try #require(MediaTypePattern("image/png"))]
        let bob = try Node("bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"), configuration: configuration)
        let bobTask = try await bob.start()
        defer {
            aliceTask.cancel()
            bobTask.cancel()
        }
        try await Harness.eventually("connected") { alice.node.node.connectedPeers == [bob.node.node.identity] }
        let image = try await alice.content.importContent(bytes: ContentTransferTests.random(100_000), mimeType: "image/png")
        let other = try await alice.content.importContent(bytes: ContentTransferTests.random(100_000), mimeType: "image/jpeg")
        // Carol is offline: bob only relays.
        let conversation = try await alice.client.createConversation(with: [NodeIdentity.generate().publicKey])
        _ = try await alice.client.send(
            [MessagePart(mimeType: "image/jpeg", content: other), MessagePart(mimeType: "image/png", content: image)], in: conversation.id)
        try await Harness.eventually("bob holds the PNG", within: 60) { bob.content.status(of: image.root) == .complete }
        #expect(bob.content.status(of: other.root) == .readyForDownload)
        #expect(alice.content.statistics.chunksServed == image.chunkCount)
    }
}
