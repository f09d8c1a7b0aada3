import Foundation
import Testing
import WeftControl
import WeftCrypto
import WeftModel
import WeftTestKit

/// Integration tests on real `weft node` processes (LocalMesh), each in its own temporary homes.
@Suite("LocalMesh integration", .serialized)
struct LocalMeshTests {
    @Test("a message crosses a 4-node line whose ends never connect")
    func line() async throws {
        try await LocalMesh.with(nodes: 4, topology: .line) { mesh in
            try await mesh.waitUntilLinked()
            let (a, d) = (mesh.nodes[0], mesh.nodes[3])
            #expect(try await !a.peers().map(\.user).contains(d.user))
            let chat = try await a.createConversation(with: [d.user])
            let message = try await a.send("hello across the line", in: chat.id)
            #expect(try await d.wait(for: .message(message), timeout: .seconds(30)) == .message(message))
            let received = try await d.messages(in: chat.id)
            #expect(received.map(\.id) == [message])
            #expect(received.first?.parts.first?.inlineData == Array("hello across the line".utf8))
            try await mesh.waitUntilConverged()
        }
    }

    @Test("distinct conversations created on two partitioned halves merge into one on every node after healing")
    func partitionMerge() async throws {
        try await LocalMesh.with(nodes: 4, topology: .line) { mesh in
            try await mesh.waitUntilLinked()
            let (a, d) = (mesh.nodes[0], mesh.nodes[3])
            try await mesh.partition([0, 1], from: [2, 3])
            try await mesh.waitUntilLinked()

            let fromA = try await a.createConversation(with: [d.user])
            let fromD = try await d.createConversation(with: [a.user])
            #expect(fromA.id != fromD.id, "apart, each side creates its own")
            let messageA = try await a.send("from a", in: fromA.id)
            let messageD = try await d.send("from d", in: fromD.id)
            try await mesh.waitUntilConverged(among: [0, 1])
            try await mesh.waitUntilConverged(among: [2, 3])
            #expect(try await d.conversations().map(\.id) == [fromD.id], "the halves are apart")

            try await mesh.healAll()
            try await mesh.waitUntilLinked()
            try await mesh.waitUntilConverged()
            for node in [a, d] {
                let shown = try await node.conversations()
                #expect(shown.count == 1, "\(node.name) shows \(shown.count) conversations")
                let merged = try #require(shown.first)
                #expect(Set([merged.id] + merged.merged) == [fromA.id, fromD.id])
                #expect(Set(try await node.messages(in: merged.id).map(\.id)) == [messageA, messageD])
                #expect(try await node.conversation(fromA.id).id == merged.id)
                #expect(try await node.conversation(fromD.id).id == merged.id)
            }
            #expect(try await a.conversations().first?.id == d.conversations().first?.id)
        }
    }

    @Test("an offline recipient gets its messages when it returns, and the sender then sees delivered")
    func offlineRecipient() async throws {
        try await LocalMesh.with(nodes: 3, topology: .line) { mesh in
            try await mesh.waitUntilLinked()
            let (a, c) = (mesh.nodes[0], mesh.nodes[2])
            try await mesh.stop(2)
            let chat = try await a.createConversation(with: [c.user])
            var sent: [OperationID] = []
            for index in 0..<3 { sent.append(try await a.send("while you were away \(index)", in: chat.id)) }
            try await mesh.waitUntilConverged(among: [0, 1])
            for message in try await a.messages(in: chat.id) {
                #expect(message.isSent, "the relay stored it")
                #expect(message.recipients.first { $0.user == c.user }?.status == .sent)
            }

            try await mesh.restart(2)
            for message in sent { try await c.wait(for: .message(message), timeout: .seconds(30)) }
            #expect(try await c.messages(in: chat.id).map(\.id) == sent)
            for message in sent { try await a.waitUntil(message, in: chat.id, reaches: .delivered, for: [c.user]) }
            #expect(try await a.messages(in: chat.id).allSatisfy { message in message.recipients.first { $0.user == c.user }?.status == .delivered })
            try await mesh.waitUntilConverged()
        }
    }

    @Test("read comes back to the sender")
    func readComesBack() async throws {
        try await LocalMesh.with(nodes: 2, topology: .line) { mesh in
            try await mesh.waitUntilLinked()
            let (a, b) = (mesh.nodes[0], mesh.nodes[1])
            let chat = try await a.createConversation(with: [b.user])
            let first = try await a.send("one", in: chat.id)
            let second = try await a.send("two", in: chat.id)
            _ = try await b.wait(for: .message(second), timeout: .seconds(30))
            #expect(try await b.conversation(chat.id).unreadCount == 2)

            try await b.markRead(first)
            try await mesh.waitUntil("the sender sees the first message read") {
                try await a.messages(in: chat.id).first { $0.id == first }?.recipients.first { $0.user == b.user }?.status == .read
            }
            #expect(try await a.messages(in: chat.id).first { $0.id == second }?.recipients.first { $0.user == b.user }?.status == .delivered)
            try await b.markAllRead(in: chat.id)
            try await mesh.waitUntil("the sender sees every message read") {
                try await a.messages(in: chat.id).allSatisfy { message in message.recipients.first { $0.user == b.user }?.status == .read }
            }
            #expect(try await b.conversation(chat.id).unreadCount == 0)
            try await mesh.waitUntilConverged()
        }
    }

    @Test("a sender SIGKILLed with 20 queued messages sends all of them after restart, none lost, none twice")
    func killedSender() async throws {
        try await LocalMesh.with(nodes: 2, topology: .line) { mesh in
            try await mesh.waitUntilLinked()
            let (a, b) = (mesh.nodes[0], mesh.nodes[1])
            try await mesh.stop(1)
            let chat = try await a.createConversation(with: [b.user])
            var sent: [OperationID] = []
            for index in 0..<20 { sent.append(try await a.send("queued \(index)", in: chat.id)) }
            #expect(try await a.status().unsentMessages == 20)
            try await mesh.kill(0)

            try await mesh.restart(1)
            try await mesh.restart(0)
            try await mesh.waitUntil("the recipient holds the 20 messages") { try await b.messages(in: chat.id).count >= 20 }
            let received = try await b.messages(in: chat.id)
            #expect(received.map(\.id) == sent, "all 20, in order, each once")
            #expect(Set(received.map(\.id)).count == 20)
            #expect(received.map { String(decoding: $0.parts.first?.inlineData ?? [], as: UTF8.self) } == (0..<20).map { "queued \($0)" })
            try await mesh.waitUntil("the sender has nothing left to send") { try await a.status().unsentMessages == 0 }
            try await mesh.waitUntilConverged()
            #expect(try await a.messages(in: chat.id).allSatisfy(\.isSent))
        }
    }

    @Test("a removed participant's node receives nothing posted after its removal, from the sender or a relay")
    func removedParticipant() async throws {
        try await LocalMesh.with(nodes: 3, topology: .full) { mesh in
            try await mesh.waitUntilLinked()
            let (a, b, c) = (mesh.nodes[0], mesh.nodes[1], mesh.nodes[2])
            let group = try await a.createConversation(with: [b.user, c.user], distinct: false)
            let before = try await a.send("before", in: group.id)
            _ = try await b.wait(for: .message(before), timeout: .seconds(30))
            _ = try await c.wait(for: .message(before), timeout: .seconds(30))

            try await a.removeParticipants([c.user], from: group.id)
            let after = try await a.send("after", in: group.id)
            // b replies once it holds `after`, so its reply follows the removal too.
            _ = try await b.wait(for: .message(after), timeout: .seconds(30))
            let reply = try await b.send("reply after", in: group.id)
            try await mesh.waitUntilConverged(among: [0, 1])
            // A fence: a later message to c in another conversation, from both a and b; once
            // c holds them, everything a and b pushed before has had its chance to arrive.
            let side = try await a.createConversation(with: [b.user, c.user], distinct: false)
            let fenceA = try await a.send("fence", in: side.id)
            _ = try await b.wait(for: .message(fenceA), timeout: .seconds(30))
            let fenceB = try await b.send("fence", in: side.id)
            _ = try await c.wait(for: .message(fenceA), timeout: .seconds(30))
            _ = try await c.wait(for: .message(fenceB), timeout: .seconds(30))

            let seen = Set(try await c.messages(in: group.id).map(\.id))
            #expect(seen.contains(before))
            #expect(!seen.contains(after))
            #expect(!seen.contains(reply))
            for message in [after, reply] {
                await #expect(throws: ControlFailure.self) { try await c.wait(for: .message(message), timeout: .zero) }
            }
            #expect(Set(try await b.messages(in: group.id).map(\.id)) == [before, after, reply])
        }
    }
}

extension LocalMeshTests {
    @Test("a failed run keeps its homes and logs, and rethrows what the body threw")
    func failedRunKeepsHomes() async throws {
        struct Planned: Error {}
        final class Box: @unchecked Sendable { var directory: URL? }
        let box = Box()
        await #expect(throws: Planned.self) {
            try await LocalMesh.with(nodes: 1, topology: .line) { mesh in
                box.directory = mesh.directory
                throw Planned()
            }
        }
        let kept = try #require(box.directory)
        let contents = try FileManager.default.contentsOfDirectory(atPath: kept.path)
        #expect(contents.contains { $0.hasSuffix(".log") }, "\(contents)")
        try? FileManager.default.removeItem(at: kept)
    }
}
