import Foundation
import NIOCore
import Testing
import WeftCompression
import WeftCrypto
import WeftModel
import WeftNode
import WeftSync
import WeftTestKit
import WeftTransfer
import WeftWire

/// A hostile member of the mesh that sets the *content* bit (SPEC.md §17.8), against real
/// `weft node` processes: floods of requests for content, a malformed HOLDINGS, and a chunk
/// frame that expands past its chunk. The middle node `b` of the line a–b–c stays up and
/// relays an honest member's message afterwards. (In the serialized LocalMesh suite.)
extension LocalMeshTests {
    private static func withContentAttacker(_ body: (LocalMesh, AttackingPeer) async throws -> Void) async throws {
        try await LocalMesh.with(nodes: 3, topology: .line) { mesh in
            try await mesh.waitUntilLinked()
            let b = mesh.nodes[1]
            let attacker = try await AttackingPeer(
                meshKeyFrom: b.home, dialing: "\(try #require(b.address))", redial: .milliseconds(250), features: [.content])
            defer { attacker.stop() }
            try await attacker.waitUntilConnected(to: b.user)
            try await body(mesh, attacker)
        }
    }

    /// c writes to a through b; a gets it, b answers its control socket.
    private static func expectRelaying(_ mesh: LocalMesh, _ text: String) async throws {
        let (a, b, c) = (mesh.nodes[0], mesh.nodes[1], mesh.nodes[2])
        #expect(b.isRunning)
        _ = try await b.status()
        let conversation = try await c.createConversation(with: [a.user])
        let sent = try await c.send(text, in: conversation.id)
        _ = try await a.wait(for: .message(sent), timeout: .seconds(30))
    }

    @Test("floods of requests for content not held: each answered at most once, the node stays up; then a malformed HOLDINGS closes that connection only")
    func contentRequestFlood() async throws {
        try await Self.withContentAttacker { mesh, attacker in
            let b = mesh.nodes[1]
            var generator = SplitMix64(seed: 17)
            let root = ContentRoot(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })!
            let indices = (0..<UInt32(256)).map { $0 }
            // 40 × 256 chunks asked at once, 20 manifests, 1,000 HOLDINGS REQUESTs.
            for _ in 0..<40 { try await attacker.send(.content(.chunkRequest(root, chunks: indices)), to: b.user) }
            for _ in 0..<20 { try await attacker.send(.content(.manifestRequest(root)), to: b.user) }
            for _ in 0..<1_000 { try await attacker.send(.content(.holdingsRequest(root)), to: b.user) }
            try await attacker.waitFor("b's answers") {
                attacker.received.contains { if case .content(.notHeld) = $0 { true } else { false } }
                    && attacker.received.contains { if case .content(.manifest(_, nil)) = $0 { true } else { false } }
            }
            try await Self.expectRelaying(mesh, "after the requests")
            let notHeld = attacker.received.reduce(0) { count, message in
                if case .content(.notHeld(_, let chunks)) = message { count + chunks.count } else { count }
            }
            let manifests = attacker.received.count { if case .content(.manifest) = $0 { true } else { false } }
            let holdings = attacker.received.count { if case .content(.holdings) = $0 { true } else { false } }
            // Each answered at most once (those past what b keeps for one peer are dropped; how
            // many depends on how fast b answers: the bounds themselves are unit-tested).
            #expect(notHeld >= 1 && notHeld <= 40 * 256, "\(notHeld) chunks answered NOT HELD")
            #expect(manifests >= 1 && manifests <= 20, "\(manifests) manifests answered")
            #expect(holdings >= 1 && holdings <= 1_000, "\(holdings) HOLDINGS answered")
            #expect(attacker.undecodable.isEmpty)

            // HOLDINGS of 16,385 chunks: malformed, ERROR 6, only this connection.
            try await attacker.sendPayload([SyncMessageType.holdings.rawValue] + root.bytes + [2, 0, 0, 0x40, 0x01], to: b.user)
            let end = try await attacker.waitForConnectionEnd(with: b.user)
            #expect(end.kind == .peerReportedError)
            #expect(end.detail.contains("HOLDINGS"), "\(end.detail)")
            try await Self.expectRelaying(mesh, "after a malformed HOLDINGS")
        }
    }

    @Test("a chunk whose zstd frame expands past its chunk: the connection is closed with ERROR 6 and the node stays up")
    func expandingChunk() async throws {
        try await Self.withContentAttacker { mesh, attacker in
            let (b, c) = (mesh.nodes[1], mesh.nodes[2])
            // Content of one chunk, described in a message of the attacker's to c: b relays it,
            // and fetches its content from the one peer holding it.
            let content = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let manifest = try ContentManifestBuilder.manifest(of: content)
            let creation = attacker.sign(
                WeftModel.Operation(
                    author: attacker.user, conversation: ConversationID.random(), sequence: 1, timestamp: now(), causes: [],
                    body: .createConversation(participants: [attacker.user, c.user], distinct: false, generation: 0, metadata: [:])))
            let message = attacker.sign(
                WeftModel.Operation(
                    author: attacker.user, conversation: creation.operation.conversation, sequence: 2, timestamp: now(),
                    causes: [creation.id],
                    body: .postMessage(
                        parts: [MessagePart(mimeType: "application/octet-stream", content: manifest.descriptor)], options: MessageOptions())))
            try await attacker.send(.operations(.init(isPush: true, operations: [creation, message])), to: b.user)

            // Answer b as a holder would, but with frames of 200 bytes more than their chunk
            // (streaming frames of a 1 KiB window: no content size in their header, a window
            // the receiver takes, so only decoding finds them out).
            func frame(_ index: UInt32) -> ByteBuffer {
                let start = Int(index) * manifest.descriptor.chunkByteCount
                let chunk = Array(content[start..<min(start + manifest.descriptor.chunkByteCount, content.count)])
                var frame = ByteBuffer(bytes: [ChunkFrame.compressedFlag])
                frame.writeBytes(ZstdStreamCompressor(level: 1, windowLog: 10).compress(chunk + Array(repeating: 0, count: 200)))
                return frame
            }
            var answered = 0
            var sentBomb = false
            try await attacker.waitFor("b to close the connection", seconds: 60) {
                let received = attacker.received
                for request in received[answered...] {
                    switch request {
                    case .content(.manifestRequest(let root)) where root == manifest.root:
                        try? await attacker.send(.content(.manifest(root, manifest)), to: b.user)
                    case .content(.holdingsRequest(let root)) where root == manifest.root:
                        try? await attacker.send(.content(.holdings(root, .all)), to: b.user)
                    case .content(.chunkRequest(let root, let chunks)) where root == manifest.root:
                        for index in chunks {
                            try? await attacker.send(.content(.chunk(ChunkMessage(root: root, index: index, frame: frame(index)))), to: b.user)
                            sentBomb = true
                        }
                    default:
                        break
                    }
                }
                answered = received.count
                return sentBomb && attacker.connectionEnd(with: b.user) != nil
            }
            let end = try await attacker.waitForConnectionEnd(with: b.user)
            #expect(end.kind == .peerReportedError)
            #expect(end.detail.contains("more than"), "\(end.detail)")
            try await Self.expectRelaying(mesh, "after the expanding chunk")
        }
    }
}
