import Foundation
import WeftControl
import WeftModel
import WeftNode

/// Three `weft node` processes in a line A–B–C on loopback. A sends `messages` text messages
/// into a conversation with C's user through its control socket (`connections` connections,
/// each with up to `window` requests in flight, pipelined as SPEC.md §15 allows; each request
/// a SEND BATCH of `batch` messages, or a SEND when `batch` is 1); the clock runs from the
/// first request until C's node holds every message and A's node shows each one delivered to C.
///
/// By default A's client is a bulk sender: 8 connections, each with 2 SEND BATCHes of 64
/// messages in flight. `--batch 1 --senders 16 --window 16` measures one SEND per message.
struct EndToEnd {
    var messages = 20_000
    var connections = 8
    var window = 2
    var batch = 64

    struct Result {
        var messages: Int
        /// The SENDs alone: A's node storing and queueing the messages.
        var sent: Duration
        /// Until C's conversation record counts every message.
        var heldByC: Duration
        /// Until A's messages all show C's delivered status.
        var deliveredAtA: Duration
    }

    func run(in directory: URL) async throws -> Result {
        let a = try NodeProcess("a", in: directory)
        let b = try NodeProcess("b", in: directory, meshKeyFrom: a)
        let c = try NodeProcess("c", in: directory, meshKeyFrom: a)
        defer { for node in [a, b, c] { node.stop() } }
        try b.start()
        try a.start(peers: [b])
        try c.start(peers: [b])
        try await waitUntil("the line A–B–C to connect", seconds: 20) {
            let (peersA, peersB, peersC) = (try await a.status().connectedPeers, try await b.status().connectedPeers, try await c.status().connectedPeers)
            return peersA == 1 && peersB == 2 && peersC == 1
        }
        let userC = try c.user
        guard case .conversation(let created) = try await a.request(.createConversation(.init(participants: [userC], announce: true)))
        else { throw BenchmarkError("CREATE answered otherwise") }
        let conversation = created.id

        let start = ContinuousClock.now
        let perConnection = messages / connections
        let socketA = a.socketPath
        try await withThrowingTaskGroup { group in
            for connection in 0..<connections {
                group.addTask {
                    try await ControlClient.withConnection(socketPath: socketA) { control in
                        let messages = (0..<perConnection).map { index in
                            ControlRequest.Outgoing(
                                [.init(mimeType: "text/plain", data: Array("message \(index) on connection \(connection)".utf8))], in: conversation)
                        }
                        let requests = batch == 1
                            ? messages.map { ControlRequest.send($0.parts, in: $0.conversation) }
                            : stride(from: 0, to: messages.count, by: batch).map { ControlRequest.sendBatch(Array(messages[$0..<min($0 + batch, messages.count)])) }
                        for response in try await control.requests(requests, window: window) {
                            switch response {
                            case .sent: continue
                            case .sentBatch(let outcomes) where outcomes.allSatisfy({ if case .sent = $0 { true } else { false } }): continue
                            default: throw BenchmarkError("SEND answered \(response)")
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let sent = ContinuousClock.now - start
        let total = perConnection * connections

        try await waitUntil("C to hold \(total) messages", seconds: 600, interval: .milliseconds(10)) {
            guard case .conversation(let record) = try? await c.request(.conversation(conversation)) else { return false }
            return record.messageCount >= total
        }
        let heldByC = ContinuousClock.now - start

        // Delivered never goes back (it can only become read), so each poll reads on from the
        // first message not yet seen delivered. Receipts come back about in order, so a poll
        // first asks for the last message alone and reads on only once it is delivered: polls
        // while the receipts are on their way cost the node one message each, not a page.
        var firstUndelivered = 0
        func isDelivered(_ message: MessageRecord) -> Bool {
            message.recipients.contains { $0.user == userC && ($0.status == .delivered || $0.status == .read) }
        }
        try await waitUntil("A to see \(total) messages delivered", seconds: 600, interval: .milliseconds(20)) {
            try await ControlClient.withConnection(socketPath: a.socketPath) { control in
                guard case .messages(_, let last) = try await control.request(.messages(conversation, offset: UInt32(total - 1))),
                    let message = last.first, isDelivered(message)
                else { return false }
                while firstUndelivered < total {
                    guard case .messages(_, let page) = try await control.request(.messages(conversation, offset: UInt32(firstUndelivered))),
                        !page.isEmpty
                    else { return false }
                    for message in page {
                        guard isDelivered(message) else { return false }
                        firstUndelivered += 1
                    }
                }
                return true
            }
        }
        return Result(messages: total, sent: sent, heldByC: heldByC, deliveredAtA: ContinuousClock.now - start)
    }
}
