import Testing
import WeftTestKit

// This file imports WeftTestKit alone, as a user's test target would: every type named below
// must come through it, or the file does not compile (top-level names are per file).

@Suite("WeftTestKit re-exports the types its API names")
struct ReexportTests {
    @Test("identifiers, records, statuses and failures are nameable with WeftTestKit alone")
    func typesAreNameable() {
        let types: [Any.Type] = [
            ConversationID.self, OperationID.self, UserID.self, DeliveryStatus.self, MessageRecord.self,
            ConversationRecord.self, ControlFailure.self, ControlObjectID.self, PeerRecord.self, NodeStatus.self,
            ReplicationCounter.self, LocalMesh.self, LocalMeshError.self,
        ]
        #expect(types.count == 13)
        #expect(DeliveryStatus.failed < DeliveryStatus.pending && DeliveryStatus.pending < DeliveryStatus.read)
        let identifier = UserIdentifier.encode(NodeIdentity.generate().publicKey)
        #expect(identifier.hasPrefix("weft1"))
    }
}
