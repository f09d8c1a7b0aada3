import Foundation
import Synchronization
import Testing
import Weft
import WeftCrypto
import WeftModel
@testable import WeftNode
import WeftStore

/// The client's progress of message parts (`WeftClient.contentProgress`): one part's, several
/// parts' weighted by size, the sender's upload, between in-process nodes over loopback.
@Suite("content progress on the client API", .timeLimit(.minutes(3)))
struct ContentProgressTests {
    typealias Harness = InProcessNodeTests
    typealias Node = ContentTransferTests.Node

    /// Collects a progress sequence's values until it ends, and how it ended.
    final class Recorder: Sendable {
        final class Box: Sendable {
            let state = Mutex<(values: [ContentProgress], ending: Result<Void, WeftError>?)>(([], nil))
        }
        private let box = Box()
        let task: Task<Void, Never>

        init(_ sequence: ContentProgressSequence) {
            let box = self.box
            task = Task {
                do throws(WeftError) {
                    for try await value in sequence { box.state.withLock { $0.values.append(value) } }
                    box.state.withLock { $0.ending = .success(()) }
                } catch {
                    box.state.withLock { $0.ending = .failure(error) }
                }
            }
        }

        var values: [ContentProgress] { box.state.withLock { $0.values } }
        var ending: Result<Void, WeftError>? { box.state.withLock { $0.ending } }
    }

    /// Alice and bob connected; bob fetches content parts only on demand (so each test says
    /// when a download starts), with `configure` applied to his configuration (he counts each
    /// chunk verified as he journals it).
    static func pair(
        _ directory: ContentTransferTests.Directory,
        configure: (inout ContentConfiguration) -> Void = { _ in }
    ) async throws -> (alice: Node, bob: Node, tasks: [Task<Void, any Error>]) {
        let meshKey = MeshKey.generate()
        let alice = try Node("alice", meshKey: meshKey, home: directory.home("alice"))
        let aliceTask = try await alice.start()
        var onDemand = ContentConfiguration()
        onDemand.downloadsParticipantContent = false
        configure(&onDemand)
        let bob = try Node(
            "bob", meshKey: meshKey, peers: [try #require(alice.address)], home: directory.home("bob"), configuration: onDemand)
        let bobTask = try await bob.start()
        try await Harness.eventually("connected") { alice.node.node.connectedPeers == [bob.node.node.identity] }
        return (alice, bob, [aliceTask, bobTask])
    }

    /// Alice sends bob a message of `contents` as rich content parts; returns it once bob has it.
    static func send(_ contents: [[UInt8]], from alice: Node, to bob: Node) async throws -> (Message, [ContentDescriptor]) {
        var descriptors: [ContentDescriptor] = []
        for bytes in contents {
            descriptors.append(try await alice.content.importContent(bytes: bytes, mimeType: "application/octet-stream"))
        }
        let conversation = try await alice.client.createConversation(with: [bob.user])
        let sent = try await alice.client.send(
            descriptors.map { MessagePart(mimeType: "application/octet-stream", content: $0) }, in: conversation.id)
        try await Harness.eventually("bob has the message") { try await bob.client.message(sent.id) != nil }
        return (sent, descriptors)
    }

    /// Every value's verified bytes at least the one before, within the total, and the total
    /// `total` throughout; the last exactly whole.
    static func checkMonotonicToWhole(_ values: [ContentProgress], total: UInt64, _ what: String) {
        #expect(!values.isEmpty, "\(what): no progress")
        #expect(values.allSatisfy { $0.totalBytes == total && $0.verifiedBytes <= total }, "\(what): totals \(values.map(\.totalBytes))")
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.verifiedBytes <= $1.verifiedBytes && $0.fraction <= $1.fraction },
                "\(what) went backwards: \(values.map(\.verifiedBytes))")
        #expect(values.last?.fraction == 1.0 && values.last?.verifiedBytes == total, "\(what) ends whole: \(String(describing: values.last))")
    }

    @Test("one part's progress starts where it stands, never goes backwards, counts the wire apart, and ends at exactly 1")
    func onePart() async throws {
        let directory = try ContentTransferTests.Directory()
        // One chunk at a time, each journaled as it comes: the progress moves chunk by chunk
        // (how many of those steps the sequence shows depends on how fast its reader is: the
        // aggregate test checks values between, where the parts come one after the other).
        let (alice, bob, tasks) = try await Self.pair(directory) { slow in
            slow.transfer.initialWindow = 1
            slow.transfer.maxWindow = 1
            slow.transfer.maxRequestsInFlight = 1
        }
        defer { for task in tasks { task.cancel() } }
        let bytes = ContentTransferTests.random(2 << 20)
        let (message, descriptors) = try await Self.send([bytes], from: alice, to: bob)
        #expect(descriptors[0].chunkCount > 4)

        let recorder = Recorder(try await bob.client.contentProgress(ofPart: 0, in: message.id))
        try await Harness.eventually("the first value: nothing fetched yet") { !recorder.values.isEmpty }
        #expect(recorder.values.first?.verifiedBytes == 0, "on demand: nothing fetched before it is asked for")
        try await bob.client.downloadContent(ofPart: 0, in: message.id)
        await recorder.task.value
        let values = recorder.values
        #expect(recorder.ending.map { (try? $0.get()) != nil } == true, "ended without an error: \(String(describing: recorder.ending))")
        Self.checkMonotonicToWhole(values, total: UInt64(bytes.count), "the part")
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.wireBytes <= $1.wireBytes }, "wire bytes never go backwards")
        // Random bytes travel raw: the wire carries about what was verified, and at least it.
        #expect((values.last?.wireBytes ?? 0) >= UInt64(bytes.count), "wire bytes: \(String(describing: values.last))")
        #expect(ContentTransferTests.held(descriptors[0].root, on: bob) == bytes)

        // Once whole: one value, exactly 1, and the end.
        let again = Recorder(try await bob.client.contentProgress(ofPart: 0, in: message.id))
        await again.task.value
        #expect(again.values.map(\.fraction) == [1.0])
    }

    @Test("three parts of 100 KiB, 1 MiB and 3 MiB: the aggregate weighs each by its size, never goes backwards, and ends at exactly 1")
    func aggregate() async throws {
        let directory = try ContentTransferTests.Directory()
        let (alice, bob, tasks) = try await Self.pair(directory)
        defer { for task in tasks { task.cancel() } }
        let sizes = [100 << 10, 1 << 20, 3 << 20]
        let contents = sizes.map { ContentTransferTests.random($0) }
        let (message, descriptors) = try await Self.send(contents, from: alice, to: bob)
        let total = UInt64(sizes.reduce(0, +))

        let recorder = Recorder(try await bob.client.contentProgress(of: (0..<3).map { MessagePartReference(message: message.id, index: $0) }))
        // One part after the other: after each, the aggregate stands exactly at the bytes of
        // the parts fetched, over all three's (a mean of the parts' fractions would say 1/3, 2/3).
        var expected: UInt64 = 0
        for (index, size) in sizes.enumerated() {
            try await bob.client.downloadContent(ofPart: index, in: message.id)
            try await Harness.eventually("bob holds part \(index)", within: 60) { bob.content.status(of: descriptors[index].root) == .complete }
            expected += UInt64(size)
            if index < 2 {
                try await Harness.eventually("the aggregate at \(expected) of \(total) bytes") {
                    recorder.values.last?.verifiedBytes == expected
                }
                let last = try #require(recorder.values.last)
                #expect(last.fraction == Double(expected) / Double(total), "weighted by size: \(last.fraction)")
                #expect(recorder.ending == nil, "not over while a part is missing")
            }
        }
        await recorder.task.value
        let values = recorder.values
        #expect(recorder.ending.map { (try? $0.get()) != nil } == true, "ended without an error: \(String(describing: recorder.ending))")
        Self.checkMonotonicToWhole(values, total: total, "the aggregate")
        #expect(values.allSatisfy { $0.fraction == Double($0.verifiedBytes) / Double(total) }, "sum(verified) / sum(total) at each value")
        for (index, bytes) in contents.enumerated() { #expect(ContentTransferTests.held(descriptors[index].root, on: bob) == bytes) }
    }

    @Test("the sender's upload progress: bytes sent at least once, from 0 until every chunk went out, ending at exactly 1")
    func upload() async throws {
        let directory = try ContentTransferTests.Directory()
        let (alice, bob, tasks) = try await Self.pair(directory)
        defer { for task in tasks { task.cancel() } }
        let bytes = ContentTransferTests.random(1 << 20)
        let (message, descriptors) = try await Self.send([bytes], from: alice, to: bob)

        let recorder = Recorder(try await alice.client.contentProgress(ofPart: 0, in: message.id))
        try await Harness.eventually("the first value: nothing sent yet") { !recorder.values.isEmpty }
        #expect(recorder.values.first?.verifiedBytes == 0)
        #expect(alice.content.status(of: descriptors[0].root) == .awaitingUpload)
        try await bob.client.downloadContent(ofPart: 0, in: message.id)
        await recorder.task.value
        #expect(recorder.ending.map { (try? $0.get()) != nil } == true, "ended without an error: \(String(describing: recorder.ending))")
        Self.checkMonotonicToWhole(recorder.values, total: UInt64(bytes.count), "the upload")
        #expect(alice.content.status(of: descriptors[0].root) == .complete)
    }

    @Test("an inline part is whole at once; a part whose node stops before it is whole ends the sequence with contentUnavailable")
    func inlineAndStopped() async throws {
        let directory = try ContentTransferTests.Directory()
        let (alice, bob, tasks) = try await Self.pair(directory)
        defer { for task in tasks { task.cancel() } }
        let (message, _) = try await Self.send([ContentTransferTests.random(300_000)], from: alice, to: bob)
        let conversation = try #require(try await alice.client.conversation(message.conversation))
        let inline = try await alice.client.send([.text("hello")], in: conversation.id)
        try await Harness.eventually("bob has the text") { try await bob.client.message(inline.id) != nil }

        let text = Recorder(try await bob.client.contentProgress(ofPart: 0, in: inline.id))
        await text.task.value
        #expect(text.values == [ContentProgress(verifiedBytes: 5, totalBytes: 5)])
        #expect(text.ending.map { (try? $0.get()) != nil } == true)

        // Never asked for: it waits, until bob's node stops.
        let waiting = Recorder(try await bob.client.contentProgress(ofPart: 0, in: message.id))
        try await Harness.eventually("the first value") { !waiting.values.isEmpty }
        tasks[1].cancel()
        _ = await tasks[1].result
        await waiting.task.value
        guard case .failure(let error) = waiting.ending else {
            Issue.record("the sequence ended without an error: \(String(describing: waiting.ending))")
            return
        }
        #expect(error.code == .contentUnavailable, "\(error)")
        await #expect(throws: WeftError.self) { _ = try await bob.client.contentProgress(ofPart: 1, in: message.id) }
    }
}
