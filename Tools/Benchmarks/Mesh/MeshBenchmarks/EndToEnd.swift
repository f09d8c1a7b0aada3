import Foundation
import WeftControl
import WeftModel
import WeftNode

/// Three `weft node` processes in a line A–B–C on loopback. A sends `messages` text messages
/// into a conversation with C's user through its control socket (`connections` connections,
/// each with up to `window` requests in flight, pipelined as SPEC.md §15 allows); the clock
/// runs from the first SEND until C's node holds every message and A's node shows each one
/// delivered to C.
struct EndToEnd {
    var messages = 20_000
    var connections = 16
    var window = ControlConstants.maxRequestsInFlight

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
                        let sends = (0..<perConnection).map { index in
                            ControlRequest.send([.init(mimeType: "text/plain", data: Array("message \(index) on connection \(connection)".utf8))], in: conversation)
                        }
                        for response in try await control.requests(sends, window: window) {
                            guard case .sent = response else { throw BenchmarkError("SEND answered \(response)") }
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
        // first message not yet seen delivered.
        var firstUndelivered = 0
        try await waitUntil("A to see \(total) messages delivered", seconds: 600, interval: .milliseconds(10)) {
            try await ControlClient.withConnection(socketPath: a.socketPath) { control in
                while firstUndelivered < total {
                    guard case .messages(_, let page) = try await control.request(.messages(conversation, offset: UInt32(firstUndelivered))),
                        !page.isEmpty
                    else { return false }
                    for message in page {
                        guard message.recipients.contains(where: { $0.user == userC && ($0.status == .delivered || $0.status == .read) })
                        else { return false }
                        firstUndelivered += 1
                    }
                }
                return true
            }
        }
        return Result(messages: total, sent: sent, heldByC: heldByC, deliveredAtA: ContinuousClock.now - start)
    }
}
