import Foundation
import Logging
import NIOCore
import Synchronization
import Testing
import WeftControl
import WeftCrypto
import WeftModel
import WeftNode
import WeftStore
import WeftSync
import WeftWire
import WeftTestKit

/// A peer inside the mesh (it has the mesh key) that sends a forged operation: the node it
/// sends to refuses it, and the rest of the mesh goes on as before. (In the serialized
/// LocalMesh suite: one mesh at a time.)
extension LocalMeshTests {
    @Test("a peer that sends a forged operation is refused and the rest of the mesh is unaffected")
    func forged() async throws {
        try await LocalMesh.with(nodes: 3, topology: .line) { mesh in
            try await mesh.waitUntilLinked()
            let (a, b, c) = (mesh.nodes[0], mesh.nodes[1], mesh.nodes[2])
            let attacker = try await AttackingPeer(meshKeyFrom: a.home, dialing: "\(try #require(a.address))")
            defer { attacker.stop() }
            try await attacker.waitUntilConnected(to: a.user)

            // A conversation "created by b" (b's user as author) but signed with the attacker's
            // key, and in the same batch a genuine conversation of the attacker's with b and c
            // and a message in it, which show that the batch was taken.
            let held = try #require(try await a.status().heldOperations)
            #expect(try await b.status().heldOperations == held)
            #expect(try await c.status().heldOperations == held)
            let forgedConversation = ConversationID.random()
            let forged = try attacker.forge(
                WeftModel.Operation(
                    author: b.user, conversation: forgedConversation, sequence: 1, timestamp: now(), causes: [],
                    body: .createConversation(participants: [b.user, c.user], distinct: false, generation: 0, metadata: [:])))
            #expect(!forged.hasValidSignature)
            let genuineConversation = ConversationID.random()
            let creation = attacker.sign(
                WeftModel.Operation(
                    author: attacker.user, conversation: genuineConversation, sequence: 1, timestamp: now(), causes: [],
                    body: .createConversation(participants: [attacker.user, b.user, c.user], distinct: false, generation: 0, metadata: [:])))
            let message = attacker.sign(
                WeftModel.Operation(
                    author: attacker.user, conversation: genuineConversation, sequence: 2, timestamp: now(), causes: [creation.id],
                    body: .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array("genuine".utf8))], options: MessageOptions())))
            try await attacker.send(.operations(.init(isPush: true, operations: [forged, creation, message])), to: a.user)

            // Every node ends up with the two genuine operations, and only those.
            try await mesh.waitUntil("every node stores the two genuine operations") {
                for node in mesh.nodes {
                    if try await node.status().heldOperations != held + 2 { return false }
                }
                return true
            }
            #expect(a.isRunning)
            for node in mesh.nodes {
                await #expect(throws: ControlFailure.self, "\(node.name) holds the forged conversation") {
                    try await node.conversation(forgedConversation)
                }
            }

            // The mesh still replicates end to end, through the node that was attacked.
            attacker.stop()
            try await mesh.waitUntilLinked()
            let chat = try await a.createConversation(with: [c.user])
            let stillHere = try await a.send("still here", in: chat.id)
            _ = try await c.wait(for: .message(stillHere), timeout: .seconds(30))
            try await mesh.waitUntilConverged(among: [1, 2])
            try await mesh.waitUntil("every node holds the same operations") {
                Set([try await a.status().heldOperations, try await b.status().heldOperations, try await c.status().heldOperations]).count == 1
            }
            // The refused operation is not counted as one a peer holds and this node lacks.
            #expect(try await a.status().unsyncedOperations == 0)
            for node in mesh.nodes {
                await #expect(throws: ControlFailure.self) { try await node.conversation(forgedConversation) }
            }
        }
    }
}

extension LocalMeshTests {
    @Test("a peer whose COMPRESSED message does not decode loses its connection (ERROR 6); the node and the mesh go on")
    func badCompressedPiece() async throws {
        try await LocalMesh.with(nodes: 2, topology: .line) { mesh in
            try await mesh.waitUntilLinked()
            let (a, b) = (mesh.nodes[0], mesh.nodes[1])
            let attacker = try await AttackingPeer(meshKeyFrom: a.home, dialing: "\(try #require(a.address))")
            defer { attacker.stop() }
            try await attacker.waitUntilConnected(to: a.user)

            // A plain message first (so the stream is fresh), then a piece zstd cannot read.
            try await attacker.send(.prune, to: a.user)
            try await attacker.sendPayload([0x08] + Array("not a zstd stream at all".utf8), to: a.user)
            let end = try await attacker.waitForConnectionEnd(with: a.user)
            #expect(end.kind == .peerReportedError)
            #expect(end.detail.contains("COMPRESSED"), "\(end.detail)")

            // a keeps its other link: a message crosses it, compressed both ways.
            #expect(a.isRunning)
            let chat = try await a.createConversation(with: [b.user])
            let sent = try await a.send(String(repeating: "a message long enough to be compressed ", count: 4), in: chat.id)
            _ = try await b.wait(for: .message(sent), timeout: .seconds(30))
        }
    }
}

