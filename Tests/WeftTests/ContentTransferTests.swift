import Foundation
import Logging
import NIOCore
import Synchronization
import Testing
import Weft
import WeftCrypto
import WeftModel
@testable import WeftNode
import WeftStore
import WeftTransfer

/// Rich content between in-process nodes over real loopback TCP (SPEC.md §17.8): content added
/// on one node reaches others as verified chunks, through relays, around a peer serving bad
/// data, and after a restart.
@Suite("content transfer over loopback", .timeLimit(.minutes(3)))
struct ContentTransferTests {
    typealias Harness = InProcessNodeTests

    /// One node with a content store in a directory of its own.
    struct Node {
        let name: String
        let node: InProcessNode
        let events: InProcessNodeTests.EventLog
        let home: URL

        var content: ContentService { node.content! }
        var client: WeftClient { node.client }
        var user: UserID { node.client.localUser }
        var address: PeerAddress? {
            events.listeningAddress.map { PeerAddress(host: $0.ipAddress!, port: $0.port!) }
        }

        /// A node over `home` (its content directory), an in-memory store, dialing `peers`.
        init(
            _ name: String, meshKey: MeshKey, peers: [PeerAddress] = [], home: URL, identity: NodeIdentity = .generate(),
            store: Store? = nil, configuration: ContentConfiguration = ContentConfiguration(),
            syncByteLimit: Int = ContentStore.defaultSyncByteLimit, replication: ReplicationConfiguration = ReplicationConfiguration()
        ) throws {
            self.name = name
            var logger = Logger(label: "test.\(name)")
            logger.logLevel = .critical
            let events = InProcessNodeTests.EventLog()
            let store = try store ?? Store(directory: nil, localUser: identity.publicKey)
            let content = ContentService(
                store: store, contentStore: try ContentStore(directory: home, syncByteLimit: syncByteLimit), configuration: configuration,
                logger: logger)
            let meshConfiguration = MeshNode.Configuration(
                identity: identity, meshKey: meshKey, displayName: name, peers: peers, tickInterval: .milliseconds(50),
                redialDelays: [.milliseconds(50), .milliseconds(200)])
            node = try InProcessNode(
                configuration: meshConfiguration, store: store, replication: replication, content: content, logger: logger
            ) { event in
                events.events.withLock { $0.append(event) }
            }
            self.events = events
            self.home = home
        }

        /// Runs the node in a task of its own (cancel it to stop the node), once it listens.
        func start() async throws -> Task<Void, any Error> {
            let node = self.node
            let task = Task { try await node.run() }
            try await Harness.eventually("\(name) listening") { events.listeningAddress != nil }
            return task
        }
    }

    /// A directory removed when the test ends.
    final class Directory: Sendable {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("weft-content-\(UUID().uuidString.prefix(8))")
        init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
        deinit { try? FileManager.default.removeItem(at: url) }
        func home(_ name: String) -> URL { url.appendingPathComponent(name) }
    }

    // MARK: - Content

    /// `count` bytes that do not compress (libsodium's: cheap even in a debug build, so that
    /// making them does not hold a cooperative thread).
    static func random(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            SystemRandomSource().fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    /// `count` bytes of text, as a message would hold (zstd -1 makes it about 3 times smaller).
    static func text(_ count: Int) -> [UInt8] {
        let words = ["weft", "mesh", "chunk", "node", "relay", "content", "verified", "the", "of", "a", "zstd", "frame", "peer",
                     "message", "part", "journal"].map { Array($0.utf8) + [0x20] }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var at = 0
            var column = 0
            while at < count {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                let word = column == 9 ? [0x0a] : words[Int(state & 15)]
                column = column == 9 ? 0 : column + 1
                for byte in word where at < count {
                    buffer[at] = byte
                    at += 1
                }
            }
            initialized = count
        }
    }

    /// What the node holds of `root`, complete, or nil.
    static func held(_ root: ContentRoot, on node: Node) -> [UInt8]? {
        node.content.contentFile(root).flatMap { FileManager.default.contents(atPath: $0.path) }.map { Array($0) }
    }

    /// Collects a content's progress until it ends.
    final class ProgressLog: Sendable {
        private let box = Box()
        let task: Task<Void, Never>

        final class Box: Sendable {
            let values = Mutex<[ContentProgress]>([])
        }

        init(_ stream: AsyncStream<ContentProgress>) {
            let box = self.box
            task = Task { for await value in stream { box.values.withLock { $0.append(value) } } }
        }

        var values: [ContentProgress] { box.values.withLock { $0 } }
    }

    // MARK: - Tests

    @Test("a message with content parts of several sizes and kinds reaches its recipient, byte for byte, with progress that never goes back and ends at 1")
    func roundTrip() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        let bob = try Node("bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"))
        let bobTask = try await bob.start()
        defer {
            aliceTask.cancel()
            bobTask.cancel()
        }
        try await Harness.eventually("connected") { alice.node.node.connectedPeers == [bob.node.node.identity] }

        // 2 KiB + 1 (one chunk), exactly one chunk (16 KiB), many chunks of 16 KiB not a multiple
        // of it, many chunks of 256 KiB and of 512 KiB; random and text, with compressed and raw
        // MIME types.
        let contents: [(bytes: [UInt8], mimeType: String)] = [
            (Self.random(2049), "application/octet-stream"),
            (Self.text(16_384), "text/plain"),
            (Self.text(200_000 + 77), "text/plain; charset=utf-8"),
            (Self.random(3 << 20 | 12_345), "image/jpeg"),
            (Self.text((2 << 20) + 1), "text/csv"),
            (Self.random((5 << 20) + 3), "application/octet-stream"),
        ]
        var parts: [MessagePart] = [.text("six contents")]
        var logs: [ContentRoot: ProgressLog] = [:]
        for (bytes, mimeType) in contents {
            let descriptor = try await alice.content.importContent(bytes: bytes, mimeType: mimeType)
            #expect(descriptor.byteCount == UInt64(bytes.count))
            #expect(alice.content.status(of: descriptor.root) == .awaitingUpload)
            #expect(Self.held(descriptor.root, on: alice) == bytes, "added whole")
            parts.append(MessagePart(mimeType: mimeType, content: descriptor))
            logs[descriptor.root] = ProgressLog(bob.content.progress(of: descriptor.root))
        }
        #expect(parts[1].content?.chunkCount == 1 && parts[2].content?.chunkCount == 1)
        #expect(parts[3].content?.chunkCount == 13 && parts[3].content?.chunkLog == 14)
        #expect(parts[4].content?.chunkCount == 13 && parts[4].content?.chunkLog == 18)
        #expect(parts[5].content?.chunkCount == 9 && parts[5].content?.chunkLog == 18)
        #expect(parts[6].content?.chunkCount == 11 && parts[6].content?.chunkLog == 19)

        let conversation = try await alice.client.createConversation(with: [bob.user])
        let sent = try await alice.client.send(parts, in: conversation.id)
        try await Harness.eventually("bob has the message") { try await bob.client.message(sent.id) != nil }
        let received = try #require(try await bob.client.message(sent.id))
        #expect(received.parts.map(\.content) == parts.map(\.content))

        for (index, (bytes, _)) in contents.enumerated() {
            let root = try #require(parts[index + 1].content?.root)
            try await Harness.eventually("bob holds content \(index)", within: 60) { bob.content.status(of: root) == .complete }
            #expect(Self.held(root, on: bob) == bytes, "content \(index) arrived byte for byte")
            try await Harness.eventually("alice sees content \(index) uploaded") { alice.content.status(of: root) == .complete }
        }
        for (root, log) in logs {
            await log.task.value
            let values = log.values
            #expect(!values.isEmpty)
            #expect(zip(values, values.dropFirst()).allSatisfy { $0.verifiedBytes <= $1.verifiedBytes }, "never backwards: \(root)")
            #expect(values.last?.fraction == 1.0)
            #expect(values.last?.verifiedBytes == values.last?.totalBytes)
        }
        let statistics = bob.content.statistics
        #expect(statistics.corruptChunks == 0)
        #expect(statistics.chunksVerified == 1 + 1 + 13 + 13 + 9 + 11, "each chunk once: \(statistics)")
        // Text went compressed, the JPEG raw: fewer bytes on the wire than the text holds.
        let textRoot = try #require(parts[5].content?.root)
        let wire = try #require(bob.content.board.progress(of: textRoot)?.wireBytes)
        #expect(wire < UInt64(contents[4].bytes.count) / 2, "text compresses: \(wire) bytes on the wire")
        let jpegRoot = try #require(parts[4].content?.root)
        #expect(bob.content.board.progress(of: jpegRoot)?.wireBytes == UInt64(contents[3].bytes.count) + 13, "raw: a flags byte a chunk")
    }

    @Test("through a relay: the relay fetches and keeps the content of a message it forwards, and serves it once the sender is offline, sending the compressed frames it received (only the sender compressed, each chunk once)")
    func relay() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        let bob = try Node("bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"))
        let bobTask = try await bob.start()
        // Carol's identity is known before she runs: alice writes to her.
        let carolIdentity = NodeIdentity.generate()
        defer {
            aliceTask.cancel()
            bobTask.cancel()
        }
        try await Harness.eventually("alice and bob connected") { bob.node.node.connectedPeers.count == 1 }

        let bytes = Self.text(700_001)
        let descriptor = try await alice.content.importContent(bytes: bytes, mimeType: "text/plain")
        let conversation = try await alice.client.createConversation(with: [carolIdentity.publicKey])
        let sent = try await alice.client.send([MessagePart(mimeType: "text/plain", content: descriptor)], in: conversation.id)

        // Bob is no participant: he relays the message and keeps its content.
        try await Harness.eventually("bob relays the message") { try bob.node.store.operations(in: conversation.id).count >= 2 }
        try await Harness.eventually("bob holds the content", within: 60) { bob.content.status(of: descriptor.root) == .complete }
        #expect(Self.held(descriptor.root, on: bob) == bytes)
        #expect(try await bob.client.message(sent.id) == nil, "bob shows nothing of it")

        // Alice goes offline; carol connects to bob only.
        aliceTask.cancel()
        _ = await aliceTask.result
        let carol = try Node(
            "carol", meshKey: meshKey, peers: [try #require(bob.address)], home: directory.home("carol"), identity: carolIdentity)
        let carolTask = try await carol.start()
        defer { carolTask.cancel() }
        try await Harness.eventually("carol has the message") { try await carol.client.message(sent.id) != nil }
        try await Harness.eventually("carol holds the content", within: 60) { carol.content.status(of: descriptor.root) == .complete }
        #expect(Self.held(descriptor.root, on: carol) == bytes)
        #expect(carol.content.statistics.chunksVerified == descriptor.chunkCount)
        #expect(alice.content.statistics.framesEncoded == descriptor.chunkCount, "alice encoded each chunk once, the first time she sent it")
        #expect(bob.content.statistics.chunksServed >= descriptor.chunkCount)
        #expect(bob.content.statistics.framesEncoded == 0, "bob served the frames he received")
        let wire = try #require(carol.content.currentProgress(of: descriptor.root)?.wireBytes)
        #expect(wire < UInt64(bytes.count) / 2, "compressed frames crossed both links: \(wire) bytes")
    }

    @Test("along a line a–b–c with all three running, the recipient gets the content through the relay while the relay fetches it")
    func relayWhileFetching() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        let bob = try Node("bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"))
        let bobTask = try await bob.start()
        let carol = try Node("carol", meshKey: meshKey, peers: [try #require(bob.address)], home: directory.home("carol"))
        let carolTask = try await carol.start()
        defer {
            aliceTask.cancel()
            bobTask.cancel()
            carolTask.cancel()
        }
        try await Harness.eventually("the line is connected") { bob.node.node.connectedPeers.count == 2 }
        let bytes = Self.text(5 << 20)
        let descriptor = try await alice.content.importContent(bytes: bytes, mimeType: "text/plain")
        let conversation = try await alice.client.createConversation(with: [carol.user])
        _ = try await alice.client.send([MessagePart(mimeType: "text/plain", content: descriptor)], in: conversation.id)
        try await Harness.eventually("carol holds the content", within: 90) { carol.content.status(of: descriptor.root) == .complete }
        #expect(Self.held(descriptor.root, on: carol) == bytes)
        #expect(Self.held(descriptor.root, on: bob) == bytes)
    }

    @Test("a peer serving corrupt chunks is found out, its connection closed, and the chunks fetched from another peer")
    func corruptSource() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        let bob = try Node("bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"))
        let bobTask = try await bob.start()
        defer {
            aliceTask.cancel()
            bobTask.cancel()
        }
        try await Harness.eventually("alice and bob connected") { bob.node.node.connectedPeers.count == 1 }
        let bytes = Self.random(1 << 20)
        let descriptor = try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream")
        #expect(descriptor.chunkCount == 16)
        await bob.content.download(descriptor)
        try await Harness.eventually("bob holds it", within: 60) { bob.content.status(of: descriptor.root) == .complete }

        // Bob's disk goes bad: a byte of every chunk flips.
        let file = try #require(bob.content.contentFile(descriptor.root))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        var damaged = bytes
        for chunk in 0..<descriptor.chunkCount { damaged[chunk * descriptor.chunkByteCount + 100] ^= 0xff }
        try Data(damaged).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o400], ofItemAtPath: file.path)

        // Carol asks both.
        let carol = try Node(
            "carol", meshKey: meshKey, peers: [try #require(alice.address), try #require(bob.address)], home: directory.home("carol"))
        let carolTask = try await carol.start()
        defer { carolTask.cancel() }
        try await Harness.eventually("carol connected to both") { carol.node.node.connectedPeers.count == 2 }
        await carol.content.download(descriptor)
        try await Harness.eventually("carol holds it", within: 60) { carol.content.status(of: descriptor.root) == .complete }
        #expect(Self.held(descriptor.root, on: carol) == bytes, "the result is right")
        #expect(carol.content.statistics.corruptChunks >= 1, "bob's chunks were found out: \(carol.content.statistics)")
        #expect(carol.content.statistics.chunksVerified == descriptor.chunkCount)
    }

    @Test("a download cut short by the receiver stopping resumes from its verified chunks when it starts again, asking only for the others")
    func resumeAfterRestart() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let aliceIdentity = NodeIdentity.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"), identity: aliceIdentity)
        let aliceTask = try await alice.start()
        let bytes = Self.random(8 << 20)
        let descriptor = try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream")
        #expect(descriptor.chunkCount == 16, "8 MiB in chunks of 512 KiB")

        // Bob asks for one chunk at a time, and syncs each as it comes.
        var slow = ContentConfiguration()
        slow.transfer.initialWindow = 1
        slow.transfer.maxWindow = 1
        slow.transfer.maxRequestsInFlight = 1
        let bobIdentity = NodeIdentity.generate()
        let bob = try Node(
            "bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"), identity: bobIdentity,
            configuration: slow, syncByteLimit: descriptor.chunkByteCount)
        let bobTask = try await bob.start()
        await bob.content.download(descriptor)
        try await Harness.eventually("bob has some of it", within: 60) {
            (bob.content.board.progress(of: descriptor.root)?.verifiedBytes ?? 0) >= UInt64(descriptor.chunkByteCount)
        }
        // Alice goes, then bob: what bob holds is what he resumes from.
        aliceTask.cancel()
        _ = await aliceTask.result
        try await Harness.eventually("bob sees alice gone") { bob.node.node.connectedPeers.isEmpty }
        bobTask.cancel()
        _ = await bobTask.result
        let before = try #require(bob.content.board.progress(of: descriptor.root))
        #expect(before.verifiedBytes < before.totalBytes, "stopped half way")
        let held = try ContentStore(directory: directory.home("bob"))
        let root = try ContentStore.Root(descriptor.root.bytes)
        #expect(held.holding(root) == .partial)

        // Both again, on the same homes: bob wants the partial content again by himself.
        let aliceAgain = try Node("alice", meshKey: meshKey, home: directory.home("alice"), identity: aliceIdentity)
        let aliceAgainTask = try await aliceAgain.start()
        let bobAgain = try Node(
            "bob", meshKey: meshKey, peers: [try #require(aliceAgain.address)], home: directory.home("bob"), identity: bobIdentity)
        let log = ProgressLog(bobAgain.content.progress(of: descriptor.root))
        let bobAgainTask = try await bobAgain.start()
        defer {
            aliceAgainTask.cancel()
            bobAgainTask.cancel()
        }
        try await Harness.eventually("bob holds it", within: 60) { bobAgain.content.status(of: descriptor.root) == .complete }
        #expect(Self.held(descriptor.root, on: bobAgain) == bytes)
        await log.task.value
        let values = log.values
        #expect(values.contains { $0.verifiedBytes > 0 && $0.verifiedBytes >= before.verifiedBytes && $0.fraction < 1 } || before.verifiedBytes == 0,
                "resumed from where it was: \(values.prefix(3))")
        // Watched from before the restart opened it: the first value is what was held, never 0.
        #expect((values.first?.verifiedBytes ?? 0) >= before.verifiedBytes, "no going back at the restart: \(values.prefix(3))")
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.verifiedBytes <= $1.verifiedBytes })
        #expect(values.last?.fraction == 1.0)
        // Only the chunks missing were asked for again.
        let resent = aliceAgain.content.statistics.chunksServed
        #expect(resent <= descriptor.chunkCount - Int(before.verifiedBytes / UInt64(descriptor.chunkByteCount)), "\(resent) chunks sent again")
        #expect(bobAgain.content.statistics.chunksVerified == resent)
    }

    @Test("a full disk pauses the download with that reason, asking for nothing meanwhile; it carries on once there is room",
          .enabled(if: SmallDisk.unavailable == nil, "\(SmallDisk.unavailable ?? "")"))
    func diskFull() async throws {
        let directory = try Directory()
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        let bytes = Self.random(1 << 20)
        let descriptor = try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream")

        let disk = try SmallDisk(kibibytes: 256)
        var configuration = ContentConfiguration()
        configuration.diskFullRetryInterval = .milliseconds(300)
        let bob = try Node("bob", meshKey: meshKey, peers: [try #require(alice.address)], home: disk.url, configuration: configuration)
        let bobTask = try await bob.start()
        defer {
            aliceTask.cancel()
            bobTask.cancel()
        }
        try await Harness.eventually("connected") { bob.node.node.connectedPeers.count == 1 }
        await bob.content.download(descriptor)
        try await Harness.eventually("bob's download pauses") {
            if case .paused(let reason) = bob.content.status(of: descriptor.root) { reason.contains("disk full") } else { false }
        }
        try await Task.sleep(for: .seconds(1))
        if case .paused = bob.content.status(of: descriptor.root) {} else { Issue.record("\(bob.content.status(of: descriptor.root))") }
        #expect(alice.content.statistics.chunksServed == 0, "nothing asked while paused")

        try disk.grow(kibibytes: 8 * 1024)
        try await Harness.eventually("bob holds it once there is room", within: 60) { bob.content.status(of: descriptor.root) == .complete }
        #expect(Self.held(descriptor.root, on: bob) == bytes)
    }
}

/// A tmpfs of a few hundred KiB on a fresh directory (a disk that fills up), unmounted when
/// released. Mounting needs root (CAP_SYS_ADMIN); `unavailable` says why it cannot be had.
final class SmallDisk {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("weft-small-disk-\(UUID().uuidString.prefix(8))")

    init(kibibytes: Int) throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        guard mount("tmpfs", url.path, "tmpfs", 0, "size=\(kibibytes)k,mode=0700") == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: url)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot mount a tmpfs: \(reason)"])
        }
    }

    /// Makes the file system larger, keeping what it holds.
    func grow(kibibytes: Int) throws {
        guard mount("tmpfs", url.path, "tmpfs", UInt(MS_REMOUNT), "size=\(kibibytes)k,mode=0700") == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot grow the tmpfs: \(String(cString: strerror(errno)))"])
        }
    }

    deinit {
        _ = umount2(url.path, Int32(MNT_DETACH))
        _ = rmdir(url.path)
    }

    static let unavailable: String? = {
        do {
            _ = try SmallDisk(kibibytes: 64)
            return nil
        } catch {
            return "skipped: \(error.localizedDescription) (the test mounts a tmpfs, which needs root)"
        }
    }()
}
