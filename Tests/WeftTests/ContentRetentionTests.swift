import Foundation
import Testing
import Weft
import WeftCrypto
import WeftModel
@testable import WeftNode
import WeftStore

/// Content follows its messages (SPEC.md §11.2 "Removing", §13.8): a relay keeps a relayed
/// message's content for the retention period and removes it with the conversation; a node
/// starting removes leftovers and fetches what its messages name and it lacks, including what
/// was queued when it stopped. In-process nodes over loopback TCP.
@Suite("content retention and restarts", .timeLimit(.minutes(3)))
struct ContentRetentionTests {
    typealias Node = ContentTransferTests.Node
    typealias Directory = ContentTransferTests.Directory
    typealias Harness = InProcessNodeTests

    /// Replication that prunes relayed conversations idle for `retention`, looking often.
    static func retaining(_ retention: Duration) -> ReplicationConfiguration {
        var replication = ReplicationConfiguration()
        replication.retention = retention
        replication.pruneInterval = .milliseconds(200)
        return replication
    }

    /// Content configuration removing unreferenced content unchanged for `grace`.
    static func grace(_ grace: Duration) -> ContentConfiguration {
        var configuration = ContentConfiguration()
        configuration.unreferencedGracePeriod = grace
        return configuration
    }

    /// The names in a node's `content/` directory that belong to `root`.
    static func names(of root: ContentRoot, in home: URL) -> [String] {
        let directory = home.appendingPathComponent(ContentStore.directoryName).path
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasPrefix(root.hex) }.sorted()
    }

    /// How much of `root` the content store in `home` holds, read from the disk.
    static func holding(_ root: ContentRoot, in home: URL) throws -> ContentStore.Holding {
        try ContentStore(directory: home).holding(try ContentStore.Root(root.bytes))
    }

    /// A node that relays and keeps no content (it does not set the *content* bit), running.
    static func contentlessRelay(meshKey: MeshKey) async throws -> (address: PeerAddress, task: Task<Void, any Error>) {
        let events = InProcessNodeTests.EventLog()
        let relay = try Harness.makeNode("relay", meshKey: meshKey, events: events)
        let task = Task { try await relay.run() }
        try await Harness.eventually("the relay listening") { events.listeningAddress != nil }
        let address = try #require(events.listeningAddress)
        return (PeerAddress(host: try #require(address.ipAddress), port: try #require(address.port)), task)
    }

    // MARK: - Retention

    @Test("a relay fetches a relayed message's content, and once the conversation is idle past retention, prunes it and removes the content; the participants keep theirs")
    func relayRemovesWithRetention() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        // Every node removes unreferenced content at once: only messages keep it.
        let configuration = Self.grace(.zero)
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"), configuration: configuration)
        let aliceTask = try await alice.start()
        let bobIdentity = NodeIdentity.generate()
        let bobStore = try Store(directory: nil, localUser: bobIdentity.publicKey)
        let bob = try Node(
            "bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"), identity: bobIdentity,
            store: bobStore, configuration: configuration)
        let bobTask = try await bob.start()
        let carol = try Node(
            "carol", meshKey: meshKey, peers: [try #require(bob.address)], home: directory.home("carol"), configuration: configuration)
        let carolTask = try await carol.start()
        defer {
            aliceTask.cancel()
            bobTask.cancel()
            carolTask.cancel()
        }
        try await Harness.eventually("the line is connected") { bob.node.node.connectedPeers.count == 2 }

        let bytes = ContentTransferTests.random(300_001)
        let descriptor = try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream")
        let conversation = try await alice.client.createConversation(with: [carol.user])
        _ = try await alice.client.send([MessagePart(mimeType: "application/octet-stream", content: descriptor)], in: conversation.id)
        let root = descriptor.root
        try await Harness.eventually("carol holds the content") { carol.content.status(of: root) == .complete }
        // Bob fetched it to forward it: he holds it whole, and keeps it while he keeps the message.
        try await Harness.eventually("bob holds the content") { bob.content.status(of: root) == .complete }
        #expect(ContentTransferTests.held(root, on: bob) == bytes)
        #expect(Self.names(of: root, in: bob.home) == [root.hex, root.hex + ".frames", root.hex + ".manifest"])
        #expect(await bob.content.removeUnreferenced() == 0)

        // Bob again, on his home and store, with a retention of a second (the first run's is a
        // month, so that nothing was pruned before carol had the content): idle past it, the
        // conversation is pruned and its content goes.
        bobTask.cancel()
        _ = await bobTask.result
        let bobAgain = try Node(
            "bob", meshKey: meshKey, home: directory.home("bob"), identity: bobIdentity, store: bobStore, configuration: configuration,
            replication: Self.retaining(.seconds(1)))
        let bobAgainTask = try await bobAgain.start()
        defer { bobAgainTask.cancel() }
        try await Harness.eventually("bob removes the content", within: 30) { Self.names(of: root, in: bobAgain.home).isEmpty }
        #expect(try bobStore.logSummary(of: conversation.id)?.isPruned == true)
        #expect(bobAgain.content.status(of: root) == .readyForDownload)
        #expect(bobAgain.content.contentFile(root) == nil)

        // The participants' passes keep theirs: their messages stay.
        #expect(await carol.content.removeUnreferenced() == 0)
        #expect(await alice.content.removeUnreferenced() == 0)
        #expect(ContentTransferTests.held(root, on: carol) == bytes)
        #expect(ContentTransferTests.held(root, on: alice) == bytes)
        #expect(try carol.node.store.logSummary(of: conversation.id)?.isPruned == false)
    }

    @Test("a download under way when its conversation is pruned stops: its files go, and wanted again it starts afresh and completes")
    func removalStopsADownload() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        // Bob hears of the message through a relay that keeps no content: his download waits
        // for a source, its partial file open.
        let relay = try await Self.contentlessRelay(meshKey: meshKey)
        defer { relay.task.cancel() }
        let alice = try Node("alice", meshKey: meshKey, peers: [relay.address], home: directory.home("alice"))
        let aliceTask = try await alice.start()
        defer { aliceTask.cancel() }
        let bobIdentity = NodeIdentity.generate()
        let bobStore = try Store(directory: nil, localUser: bobIdentity.publicKey)
        let bob = try Node(
            "bob", meshKey: meshKey, peers: [relay.address], home: directory.home("bob"), identity: bobIdentity, store: bobStore)
        let bobTask = try await bob.start()

        let bytes = ContentTransferTests.random(100_000)
        let descriptor = try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream")
        let root = descriptor.root
        let conversation = try await alice.client.createConversation(with: [NodeIdentity.generate().publicKey])
        _ = try await alice.client.send([MessagePart(mimeType: "application/octet-stream", content: descriptor)], in: conversation.id)
        try await Harness.eventually("bob's download waits for a source") {
            guard case .paused = bob.content.status(of: root) else { return false }
            return try Self.holding(root, in: bob.home) == .partial
        }

        // Bob again, alone, with a retention of a second: he resumes the download, which waits,
        // until the conversation is pruned and the partial content, unchanged for the grace
        // period, is removed.
        bobTask.cancel()
        _ = await bobTask.result
        let bobAgain = try Node(
            "bob", meshKey: meshKey, home: directory.home("bob"), identity: bobIdentity, store: bobStore,
            configuration: Self.grace(.seconds(3)), replication: Self.retaining(.seconds(1)))
        let bobAgainTask = try await bobAgain.start()
        defer { bobAgainTask.cancel() }
        try await Harness.eventually("bob resumes the download") {
            if case .paused = bobAgain.content.status(of: root) { true } else { false }
        }
        try await Harness.eventually("bob prunes and removes the partial content", within: 30) {
            Self.names(of: root, in: bobAgain.home).isEmpty && bobAgain.content.status(of: root) == .readyForDownload
        }
        #expect(try bobStore.logSummary(of: conversation.id)?.isPruned == true)

        // Nothing of the old download is left in the way: asked for again, it is fetched anew
        // (and kept for the grace period, though no message names it any more).
        bobAgain.node.node.connect(to: try #require(alice.address))
        try await Harness.eventually("bob connected to alice") { bobAgain.node.node.isConnected(alice.node.node.identity) }
        await bobAgain.content.download(descriptor)
        try await Harness.eventually("bob holds it") { bobAgain.content.status(of: root) == .complete }
        #expect(ContentTransferTests.held(root, on: bobAgain) == bytes)
    }

    @Test("at start, content no message refers to is removed, unless just added; content a message names stays")
    func startRemovesLeftovers() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let identity = NodeIdentity.generate()
        let store = try Store(directory: nil, localUser: identity.publicKey)
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"), identity: identity, store: store)
        let aliceTask = try await alice.start()
        let unsent = try await alice.content.importContent(bytes: ContentTransferTests.random(5_000), mimeType: "image/png")
        let sentBytes = ContentTransferTests.random(6_000)
        let sent = try await alice.content.importContent(bytes: sentBytes, mimeType: "image/png")
        let conversation = try await alice.client.createConversation(with: [NodeIdentity.generate().publicKey])
        _ = try await alice.client.send([MessagePart(mimeType: "image/png", content: sent)], in: conversation.id)
        // Just added and not sent: a pass keeps it (the message that sends it may be on its way).
        #expect(await alice.content.removeUnreferenced() == 0)
        #expect(alice.content.status(of: unsent.root) == .awaitingUpload)
        aliceTask.cancel()
        _ = await aliceTask.result

        // Again on the same home and store, with no grace: the unsent content is a leftover.
        let again = try Node(
            "alice", meshKey: meshKey, home: directory.home("alice"), identity: identity, store: store, configuration: Self.grace(.zero))
        let againTask = try await again.start()
        defer { againTask.cancel() }
        try await Harness.eventually("the leftover is removed") { Self.names(of: unsent.root, in: again.home).isEmpty }
        // Its files go first; then the driver forgets what it said of it (its upload too).
        try await Harness.eventually("the leftover is forgotten") { again.content.status(of: unsent.root) == .readyForDownload }
        #expect(ContentTransferTests.held(sent.root, on: again) == sentBytes, "a message names it")
    }

    // MARK: - Restarts

    @Test("contents queued beyond the downloads under way when the node stops are fetched after it starts again")
    func queuedSurviveRestart() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let relay = try await Self.contentlessRelay(meshKey: meshKey)
        defer { relay.task.cancel() }
        let alice = try Node("alice", meshKey: meshKey, peers: [relay.address], home: directory.home("alice"))
        let aliceTask = try await alice.start()
        defer { aliceTask.cancel() }

        // Bob runs 2 downloads at once; the message names 5 contents.
        var twoAtOnce = ContentConfiguration()
        twoAtOnce.transfer.maxDownloads = 2
        let bobIdentity = NodeIdentity.generate()
        let bobHome = directory.home("bob")
        let contents = (0..<5).map { _ in ContentTransferTests.random(70_000) }
        var descriptors: [ContentDescriptor] = []
        for bytes in contents {
            descriptors.append(try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream"))
        }
        let conversation = try await alice.client.createConversation(with: [bobIdentity.publicKey])
        let sent = try await alice.client.send(
            descriptors.map { MessagePart(mimeType: "application/octet-stream", content: $0) }, in: conversation.id)

        // Bob hears of the message through the relay, which keeps no content: nothing arrives,
        // two downloads open and wait for a source, three wait for room.
        try FileManager.default.createDirectory(at: bobHome, withIntermediateDirectories: true)
        let bob = try Node(
            "bob", meshKey: meshKey, peers: [relay.address], home: bobHome, identity: bobIdentity,
            store: try Store(directory: bobHome, localUser: bobIdentity.publicKey), configuration: twoAtOnce)
        let bobTask = try await bob.start()
        try await Harness.eventually("bob has the message") { try await bob.client.message(sent.id) != nil }
        try await Harness.eventually("two downloads open, three wait for them") {
            let waiting = descriptors.filter { bob.content.status(of: $0.root) == .paused(reason: "waiting for other downloads") }
            let open = try descriptors.filter { try Self.holding($0.root, in: bobHome) == .partial }
            return waiting.count == 3 && open.count == 2
        }
        bobTask.cancel()
        _ = await bobTask.result
        let queued = try descriptors.filter { try Self.holding($0.root, in: bobHome) == .absent }
        #expect(queued.count == 3, "no file says to fetch those")

        // Bob again, on the same home, connected to alice: every content arrives.
        let bobAgain = try Node(
            "bob", meshKey: meshKey, peers: [try #require(alice.address)], home: bobHome, identity: bobIdentity,
            store: try Store(directory: bobHome, localUser: bobIdentity.publicKey), configuration: twoAtOnce)
        let bobAgainTask = try await bobAgain.start()
        defer { bobAgainTask.cancel() }
        for (index, descriptor) in descriptors.enumerated() {
            try await Harness.eventually("bob holds content \(index)") { bobAgain.content.status(of: descriptor.root) == .complete }
            #expect(ContentTransferTests.held(descriptor.root, on: bobAgain) == contents[index])
        }
        let chunks = descriptors.map(\.chunkCount).reduce(0, +)
        #expect(bobAgain.content.statistics.chunksVerified == chunks, "each chunk once: \(bobAgain.content.statistics)")
    }

    @Test("contents asked for on demand, some still waiting for other downloads when the node stops, are fetched after it starts again")
    func onDemandSurviveRestart() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        defer { aliceTask.cancel() }
        let contents = (0..<3).map { _ in ContentTransferTests.random(70_000) }
        var descriptors: [ContentDescriptor] = []
        for bytes in contents {
            descriptors.append(try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream"))
        }

        // Bob runs one download at once, connects to nobody, and is asked for all three (no
        // message names them: only the asking keeps them wanted).
        var oneAtOnce = ContentConfiguration()
        oneAtOnce.transfer.maxDownloads = 1
        let bobIdentity = NodeIdentity.generate()
        let bobHome = directory.home("bob")
        let bob = try Node("bob", meshKey: meshKey, home: bobHome, identity: bobIdentity, configuration: oneAtOnce)
        let bobTask = try await bob.start()
        for descriptor in descriptors { await bob.content.download(descriptor) }
        try await Harness.eventually("one download open, two waiting") {
            descriptors.filter { bob.content.status(of: $0.root) == .paused(reason: "waiting for other downloads") }.count == 2
        }
        bobTask.cancel()
        _ = await bobTask.result
        for descriptor in descriptors {
            #expect(try Self.holding(descriptor.root, in: bobHome) == .partial, "its journal says to fetch it")
        }

        // Bob again, on the same home, connected to alice: every content arrives.
        let bobAgain = try Node(
            "bob", meshKey: meshKey, peers: [try #require(alice.address)], home: bobHome, identity: bobIdentity, configuration: oneAtOnce)
        let bobAgainTask = try await bobAgain.start()
        defer { bobAgainTask.cancel() }
        for (index, descriptor) in descriptors.enumerated() {
            try await Harness.eventually("bob holds content \(index)") { bobAgain.content.status(of: descriptor.root) == .complete }
            #expect(ContentTransferTests.held(descriptor.root, on: bobAgain) == contents[index])
        }
    }
}
