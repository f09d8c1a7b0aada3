import Foundation
import NIOCore
import NIOPosix
import Testing
import WeftControl
import WeftCrypto
import WeftModel
import WeftNode

/// The control socket at the frame level: a real node, raw bytes on its socket.
@Suite("The control socket refuses malformed frames, one connection at a time", .serialized, .timeLimit(.minutes(2)))
struct ControlSocketTests {
    /// Writes `bytes` on a new connection and collects what the node answers until it closes,
    /// or until `frames` whole frames have come.
    private func exchange(_ socket: String, _ bytes: [UInt8], frames: Int = .max) async throws -> [UInt8] {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(unixDomainSocketPath: socket) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            try await outbound.write(ByteBuffer(bytes: bytes))
            var received: [UInt8] = []
            for try await chunk in inbound {  // ends when the node closes
                received += chunk.readableBytesView
                var scan = ByteBuffer(bytes: received)
                var count = 0
                while try ControlFrame.read(from: &scan) != nil { count += 1 }
                if count >= frames { break }
            }
            return received
        }
    }

    @Test("each invalid vector gets one ERROR with its code, the connection closes, and the node serves on")
    func malformedFrames() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        try await alice.start()
        let socket = "\(alice.home)/control.sock"
        let vectors = try ControlVectors.load()
        for entry in vectors.entries("invalid") {
            let hex = entry["hex"] as! String
            var input = stride(from: 0, to: hex.count, by: 2).map {
                UInt8(hex[hex.index(hex.startIndex, offsetBy: $0)..<hex.index(hex.startIndex, offsetBy: $0 + 2)], radix: 16)!
            }
            // Bytes after the bad frame (a valid PING) must not be answered: the connection is done.
            input += ControlRequest.ping(1).frame(requestID: 99).encoded.readableBytesView
            var answer = ByteBuffer(bytes: try await exchange(socket, input))
            let frame = try #require(try ControlFrame.read(from: &answer), "\(entry["description"]!)")
            guard case .error(let failure) = try ControlResponse(frame: frame) else {
                Issue.record("\(entry["description"]!): not an ERROR")
                continue
            }
            #expect(failure.code.rawValue == UInt16(entry["errorCode"] as! Int), "\(entry["description"]!)")
            #expect(answer.readableBytes == 0, "\(entry["description"]!): more than one frame came back")
        }
        // The node still answers on a new connection.
        let pong = try await ControlClient.withConnection(socketPath: socket) { try await $0.request(.ping(42)) }
        #expect(pong == .pong(42))
        #expect(try await alice.stop() == 0)
    }

    @Test("requests pipelined on one connection are each answered with their id")
    func pipelined() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        try await alice.start()
        var input: [UInt8] = []
        for id in UInt32(1)...20 { input += ControlRequest.ping(UInt64(id) * 3).frame(requestID: id).encoded.readableBytesView }
        var answer = ByteBuffer(bytes: try await exchange("\(alice.home)/control.sock", input, frames: 20))
        var pongs: [UInt32: UInt64] = [:]
        while let frame = try ControlFrame.read(from: &answer) {
            if case .pong(let value) = try ControlResponse(frame: frame) { pongs[frame.requestID] = value }
        }
        #expect(pongs == Dictionary(uniqueKeysWithValues: (UInt32(1)...20).map { ($0, UInt64($0) * 3) }))
        #expect(try await alice.stop() == 0)
    }

    @Test("a client's pipelined requests come back in the order asked, an ERROR in its place, past the node's 16 in flight")
    func clientPipelines() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        try await alice.start()
        let unknown = try #require(ConversationID(bytes: [UInt8](repeating: 7, count: 16)))
        var requests = (UInt64(1)...40).map { ControlRequest.ping($0 * 5) }
        requests[17] = .conversation(unknown)
        for window in [1, 5, 16] {
            let responses = try await ControlClient.withConnection(socketPath: "\(alice.home)/control.sock") {
                try await $0.requests(requests, window: window)
            }
            #expect(responses.count == 40)
            for (index, response) in responses.enumerated() where index != 17 {
                #expect(response == .pong(UInt64(index + 1) * 5), "window \(window), request \(index)")
            }
            guard case .error(let failure) = responses[17] else {
                Issue.record("window \(window): the unknown conversation was answered \(responses[17])")
                continue
            }
            #expect(failure.code == .unknownConversation, "\(failure)")
        }
        #expect(try await alice.stop() == 0)
    }

    @Test("SEND BATCH stores its messages in order and refuses only the bad ones, each with SEND's code")
    func sendBatch() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        try await alice.start()
        let socket = "\(alice.home)/control.sock"
        let friend = NodeIdentity.generate().publicKey
        guard case .conversation(let conversation) = try await ControlClient.withConnection(socketPath: socket, {
            try await $0.request(.createConversation(.init(participants: [friend])))
        }) else { Issue.record("CREATE CONVERSATION answered otherwise"); return }
        let unknown = try #require(ConversationID(bytes: [UInt8](repeating: 7, count: 16)))
        let text = { (words: String) in [ControlRequest.Part(mimeType: "text/plain", data: Array(words.utf8))] }
        let batch: [ControlRequest.Outgoing] = [
            .init(text("one"), in: conversation.id),
            .init(text("lost"), in: unknown),
            .init([.init(mimeType: "nope", data: [1])], in: conversation.id),
            .init(text("two"), in: conversation.id),
        ]
        let response = try await ControlClient.withConnection(socketPath: socket) { try await $0.request(.sendBatch(batch)) }
        guard case .sentBatch(let outcomes) = response, outcomes.count == 4 else {
            Issue.record("SEND BATCH answered \(response)")
            return
        }
        guard case .sent(let first) = outcomes[0], case .sent(let second) = outcomes[3] else {
            Issue.record("the good messages were not sent: \(outcomes)")
            return
        }
        guard case .refused(let unknownFailure) = outcomes[1], case .refused(let mimeFailure) = outcomes[2] else {
            Issue.record("the bad messages were not refused: \(outcomes)")
            return
        }
        #expect(unknownFailure.code == .unknownConversation)
        #expect(mimeFailure.code == .invalidMIMEType)
        guard case .messages(let total, let page) = try await ControlClient.withConnection(socketPath: socket, {
            try await $0.request(.messages(conversation.id, offset: 0))
        }) else { Issue.record("MESSAGES answered otherwise"); return }
        #expect(total == 2)
        #expect(page.map(\.id) == [first, second])
        #expect(page.map { $0.parts.first?.inlineData } == [Array("one".utf8), Array("two".utf8)])
        #expect(try await alice.stop() == 0)
    }

    @Test("PEERS says how each link came about: a CONNECT's dialer shows added, the other side inbound")
    func peerOrigins() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let carol = try await RunningNode(dir, "carol", meshKeyFrom: alice)
        try await alice.start()
        try await carol.start()
        _ = try await ControlClient.withConnection(socketPath: "\(carol.home)/control.sock") { try await $0.request(.connect(address: alice.address)) }
        try await eventually("carol lists alice") {
            let peers = try await carol.json("peers") as? [[String: Any]] ?? []
            return peers.count == 1
        }
        #expect((try await carol.json("peers") as? [[String: Any]])?.first?["origin"] as? String == "added")
        try await eventually("alice lists carol, inbound") {
            let peers = try await alice.json("peers") as? [[String: Any]] ?? []
            return peers.first?["origin"] as? String == "inbound"
        }
        #expect(try await carol.stop() == 0)
        #expect(try await alice.stop() == 0)
    }
}
