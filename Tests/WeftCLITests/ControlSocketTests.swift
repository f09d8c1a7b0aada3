import Foundation
import NIOCore
import NIOPosix
import Testing
import WeftControl
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
}
