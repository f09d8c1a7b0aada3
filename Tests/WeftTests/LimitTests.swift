import Foundation
import Testing
import Weft
import WeftCrypto
import WeftModel
import WeftStore

@Suite("the client's limits: lists beyond what the encoding carries are refused before anything is encoded")
struct LimitTests {
    /// `count` distinct user keys (not curve points: the encoding takes keys as bytes).
    static func users(_ count: Int) -> Set<UserID> {
        Set((0..<count).map { index in
            PublicIdentity(unvalidatedBytes: [UInt8](repeating: 0xa5, count: 28) + withUnsafeBytes(of: UInt32(index).bigEndian, Array.init))
        })
    }

    static let tooManyUsers = Operation.maxItems + 1
    static let tooManyItems = OperationBody.maxListCount + 1

    @Test("every public entry that takes a list: participants, metadata keys, parts")
    func lists() async throws {
        let alice = try makeClient()
        let bob = NodeIdentity.generate().publicKey
        let conversation = try await alice.createConversation(with: [bob])
        let before = try await alice.count(ConversationQuery())
        let participants = WeftError.tooLarge("a participant list of \(Self.tooManyUsers) users (the limit is \(Operation.maxItems))")

        // The local user makes the creation's list one longer.
        await #expect(throws: participants) { try await alice.createConversation(with: Self.users(Operation.maxItems)) }
        await #expect(throws: participants) { try await alice.addParticipants(Self.users(Self.tooManyUsers), to: conversation.id) }
        await #expect(throws: participants) { try await alice.removeParticipants(Self.users(Self.tooManyUsers), from: conversation.id) }

        let keys = Dictionary(uniqueKeysWithValues: (0..<Self.tooManyItems).map { ("k\($0)", "v") })
        let metadata = WeftError.tooLarge("\(Self.tooManyItems) metadata keys (the limit is 65535)")
        await #expect(throws: metadata) {
            try await alice.createConversation(with: [bob], options: ConversationOptions(distinct: false, metadata: keys))
        }
        await #expect(throws: metadata) { try await alice.setMetadata(keys.mapValues { $0 }, in: conversation.id) }

        let parts = Array(repeating: MessagePart(mimeType: "text/plain", data: []), count: Self.tooManyItems)
        await #expect(throws: WeftError.tooLarge("\(Self.tooManyItems) message parts (the limit is 65535)")) {
            try await alice.send(parts, in: conversation.id)
        }

        // Nothing was written.
        #expect(try await alice.count(ConversationQuery()) == before)
        #expect(try await alice.count(MessageQuery()) == 0)
        #expect(try await alice.conversation(conversation.id)?.participants.count == 2)
        #expect(try await alice.conversation(conversation.id)?.metadata.isEmpty == true)

        // At the limit, a list goes through.
        try await alice.addParticipants(Self.users(Operation.maxItems - 2), to: conversation.id)
        #expect(try await alice.conversation(conversation.id)?.participants.count == Operation.maxItems)
    }
}
