import Foundation
import NIOCore
import Testing
import WeftCrypto
import WeftModel
@testable import WeftSync

/// `Protocol/vectors/sync-messages.json` (SPEC.md §14.2–§14.8, §14.12), checked in both directions.
struct SyncMessageVectors: Decodable, Sendable {
    struct Head: Decodable, Sendable { var author: String; var sequence: String }
    struct WantEntry: Decodable, Sendable { var conversation: String; var heads: [Head]?; var ids: [String] }
    struct SummaryEntry: Decodable, Sendable { var conversation: String; var digest: String; var lastActivity: String }
    struct Announcement: Decodable, Sendable { var conversation: String; var author: String; var sequence: String; var id: String }
    struct StoredRange: Decodable, Sendable { var conversation: String; var author: String; var first: String; var last: String }
    struct Name: Decodable, Sendable { var user: String; var displayName: String }
    struct Fields: Decodable, Sendable {
        var final: Bool?
        var graft: Bool?
        var pushed: Bool?
        var entries: [SummaryEntryOrWant]?
        var operations: [String]?
        var ids: [String]?
        var announcements: [Announcement]?
        var ranges: [StoredRange]?
        var names: [Name]?
    }
    /// SUMMARY and WANT both name their list `entries`.
    struct SummaryEntryOrWant: Decodable, Sendable {
        var conversation: String
        var digest: String?
        var lastActivity: String?
        var heads: [Head]??
        var ids: [String]?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            conversation = try container.decode(String.self, forKey: .conversation)
            digest = try container.decodeIfPresent(String.self, forKey: .digest)
            lastActivity = try container.decodeIfPresent(String.self, forKey: .lastActivity)
            ids = try container.decodeIfPresent([String].self, forKey: .ids)
            // Present as null means "no heads"; absent means a SUMMARY entry.
            heads = container.contains(.heads) ? .some(try container.decodeIfPresent([Head].self, forKey: .heads)) : .none
        }

        enum CodingKeys: String, CodingKey { case conversation, digest, lastActivity, heads, ids }
    }
    struct Message: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var type: String
        var typeByte: UInt8
        var hex: String
        var fields: Fields
        var testDescription: String { description }
    }
    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var hex: String
        var error: String
        var errorCode: UInt16
        var testDescription: String { description }
    }

    var messages: [Message]
    var invalid: [Invalid]

    static func load() throws -> SyncMessageVectors {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/sync-messages.json")
        return try JSONDecoder().decode(Self.self, from: Data(contentsOf: url))
    }
}

extension SyncMessageVectors.Message {
    /// The message the vector's fields describe, built without the codec.
    func message() throws -> SyncMessage {
        func conversation(_ hex: String) -> ConversationID { ConversationID(bytes: bytes(hex))! }
        func id(_ hex: String) -> OperationID { OperationID(bytes: bytes(hex))! }
        func user(_ hex: String) -> UserID { PublicIdentity(unvalidatedBytes: bytes(hex)) }
        switch type {
        case "SUMMARY":
            return .summary(SyncMessage.Summary(isFinal: fields.final!, entries: fields.entries!.map {
                SyncMessage.Summary.Entry(
                    conversation: conversation($0.conversation), digest: SetDigest(bytes: bytes($0.digest!))!,
                    lastActivity: HLCTimestamp(rawValue: UInt64($0.lastActivity!)!))
            }))
        case "WANT":
            return .want(SyncMessage.Want(isGraft: fields.graft!, entries: fields.entries!.map { entry in
                var beyond: VersionVector?
                if let heads = entry.heads!.flatMap({ $0 }) {
                    var vector = VersionVector()
                    for head in heads { vector.set(user(head.author), UInt64(head.sequence)!) }
                    beyond = vector
                }
                return SyncMessage.Want.Entry(conversation: conversation(entry.conversation), beyond: beyond, ids: entry.ids!.map(id))
            }))
        case "OPERATIONS":
            return .operations(SyncMessage.Operations(
                isPush: fields.pushed!, operations: try fields.operations!.map { try SignedOperation(wireBytes: bytes($0)) }))
        case "STORED":
            return .stored(fields.ranges!.map {
                SlotRange(
                    conversation: conversation($0.conversation), author: user($0.author), sequences: UInt64($0.first)!...UInt64($0.last)!)
            })
        case "IHAVE":
            return .ihave(fields.announcements!.map {
                SyncMessage.Announcement(
                    conversation: conversation($0.conversation), author: user($0.author), sequence: UInt64($0.sequence)!, id: id($0.id))
            })
        case "PRUNE":
            return .prune
        case "NAMES":
            return .names(fields.names!.map { SyncMessage.UserName(user: user($0.user), displayName: $0.displayName) })
        default:
            Issue.record("unknown type \(type)")
            return .prune
        }
    }
}

@Suite("Protocol vectors: sync message bodies (SPEC.md §14.2–§14.8, §14.12)")
struct SyncMessageVectorTests {
    @Test("encoding the vector's fields gives its bytes", arguments: try SyncMessageVectors.load().messages)
    func encode(_ vector: SyncMessageVectors.Message) throws {
        let message = try vector.message()
        #expect(message.type.description == vector.type)
        #expect(message.type.rawValue == vector.typeByte)
        #expect(try message.encode() == bytes(vector.hex))
        #expect(message.encodedByteCount == bytes(vector.hex).count)
    }

    @Test("the vector's bytes decode to its fields", arguments: try SyncMessageVectors.load().messages)
    func decode(_ vector: SyncMessageVectors.Message) throws {
        #expect(try SyncMessage(payload: bytes(vector.hex)) == vector.message())
    }

    @Test("every proper prefix of a vector is refused, never trapping", arguments: try SyncMessageVectors.load().messages)
    func prefixes(_ vector: SyncMessageVectors.Message) throws {
        let payload = bytes(vector.hex)
        for length in 0..<payload.count {
            #expect(throws: SyncMessageError.self) { try SyncMessage(payload: Array(payload[..<length])) }
        }
    }

    @Test("invalid bodies are refused with the vector's error and ERROR code", arguments: try SyncMessageVectors.load().invalid)
    func invalid(_ vector: SyncMessageVectors.Invalid) throws {
        do {
            let message = try SyncMessage(payload: bytes(vector.hex))
            Issue.record("decoded \(message)")
        } catch {
            #expect(error.vectorName == vector.error, "\(error)")
            #expect(error.code.rawValue == vector.errorCode)
        }
    }

    @Test("HAVE bodies of reconciliation.json travel as sync messages of type 0x01, both ways")
    func haveVectors() throws {
        let vectors = try ReconciliationVectors.load()
        for vector in vectors.messages {
            let payload = [SyncMessageType.have.rawValue] + bytes(vector.bodyHex)
            let message = SyncMessage.have(try HaveMessage(body: bytes(vector.bodyHex)))
            #expect(try SyncMessage(payload: payload) == message, "\(vector.description)")
            #expect(try message.encode() == payload)
            #expect(message.encodedByteCount == payload.count)
        }
        for vector in vectors.invalid {
            do {
                let message = try SyncMessage(payload: [SyncMessageType.have.rawValue] + bytes(vector.bodyHex))
                Issue.record("decoded \(message)")
            } catch {
                #expect(error.vectorName == vector.error, "\(vector.description): \(error)")
                #expect(error.code.rawValue == 6)
            }
        }
    }

    @Test("every type but HAVE, COMPRESSED and content transfer's is in the vectors (theirs are in reconciliation.json, sync-stream.json and content-transfer.json)")
    func everyTypeCovered() throws {
        let covered = Set(try SyncMessageVectors.load().messages.map(\.typeByte))
        let elsewhere: Set<SyncMessageType> = [.have, .compressed, .holdingsRequest, .holdings, .manifestRequest, .manifest, .chunkRequest, .chunk, .notHeld, .cancel]
        #expect(covered == Set(SyncMessageType.allCases.filter { !elsewhere.contains($0) }.map(\.rawValue)))
        // Each content-transfer type has its vectors in content-transfer.json.
        let content = Set(try ContentTransferVectors.load().messages.map(\.typeByte))
        #expect(content == Set(elsewhere.subtracting([.have, .compressed]).map(\.rawValue)))
    }
}

@Suite("Sync messages: round trips")
struct SyncMessageRoundTripTests {
    @Test("built messages survive encode and decode")
    func roundTrips() throws {
        let ops = try SyncFixtures.conversation(messages: 3)
        let conversation = ops[0].operation.conversation
        var heads = VersionVector()
        heads.set(SyncFixtures.users[0], 4)
        heads.set(SyncFixtures.users[1], 9)
        let messages: [SyncMessage] = [
            .have(Reconciler(set: ReconciliationSet([(conversation, SetDigest(ops.map(\.id)))])).initiate()),
            .have(try HaveMessage(ranges: [])),
            .summary(SyncMessage.Summary(isFinal: true, entries: [
                SyncMessage.Summary.Entry(conversation: conversation, digest: SetDigest(ops.map(\.id)), lastActivity: ops[3].operation.timestamp)
            ])),
            .want(SyncMessage.Want(isGraft: true, entries: [
                SyncMessage.Want.Entry(conversation: conversation, beyond: heads, ids: ops.map(\.id).sorted())
            ])),
            .operations(SyncMessage.Operations(isPush: true, operations: ops)),
            .stored(SlotRange.covering(ops.map(\.operation)) + [
                SlotRange(conversation: conversation, author: SyncFixtures.users[1], sequences: 0...UInt64.max)
            ]),
            .ihave(ops.map(SyncMessage.Announcement.init)),
            .prune,
            .names([
                SyncMessage.UserName(user: SyncFixtures.users[0], displayName: "carol"),
                SyncMessage.UserName(user: SyncFixtures.users[1], displayName: ""),
            ]),
        ]
        for message in messages {
            let payload = try message.encode()
            #expect(payload.count == message.encodedByteCount)
            #expect(try SyncMessage(payload: payload) == message)
        }
    }

    @Test("STORED names runs of slots: the fewest ranges covering exactly the operations, ascending")
    func slotRanges() throws {
        let alice = try SyncFixtures.conversation(messages: 6)  // sequences 1 to 7 of user 0
        let bob = try SyncFixtures.conversation(messages: 2, author: 1)
        let (a, b) = (alice[0].operation.conversation, bob[0].operation.conversation)
        // Out of order, one twice, with a gap after sequence 3, and another log.
        let acknowledged = [alice[6], alice[1], bob[0], alice[0], alice[2], alice[1], alice[4], bob[1]].map(\.operation)
        var expected = [
            SlotRange(conversation: a, author: SyncFixtures.users[0], sequences: 1...3),
            SlotRange(conversation: a, author: SyncFixtures.users[0], sequences: 5...5),
            SlotRange(conversation: a, author: SyncFixtures.users[0], sequences: 7...7),
            SlotRange(conversation: b, author: SyncFixtures.users[1], sequences: 1...2),
        ]
        if b < a { expected = Array(expected[3...] + expected[..<3]) }
        #expect(SlotRange.covering(acknowledged) == expected)
        #expect(SlotRange.covering([WeftModel.Operation]()) == [])
        let message = SyncMessage.stored(expected)
        #expect(message.encodedByteCount == 1 + 2 + 4 * 64)
        #expect(try SyncMessage(payload: try message.encode()) == message)
    }

    @Test("an operation whose body was tampered with is refused as that operation, by index")
    func tamperedOperation() throws {
        let ops = try SyncFixtures.conversation(messages: 1)
        var payload = try SyncMessage.operations(SyncMessage.Operations(isPush: false, operations: ops)).encode()
        // The second operation's version byte: type, flags, count, first wire form, its length.
        payload[1 + 1 + 2 + SyncMessage.byteCount(of: ops[0]) + 4] = 9
        do {
            _ = try SyncMessage(payload: payload)
            Issue.record("a tampered operation was decoded")
        } catch {
            #expect(error.vectorName == "invalidOperation")
            #expect(error.description.contains("operation 1"))
        }
    }
}

@Suite("NAMES (SPEC.md §14.12)")
struct NamesMessageTests {
    static func names(_ count: Int, name: String = "u") -> [SyncMessage.UserName] {
        (0..<count).map { index in
            SyncMessage.UserName(user: PublicIdentity(unvalidatedBytes: [UInt8](repeating: UInt8(index % 256), count: 31) + [UInt8(index / 256)]), displayName: name)
        }
    }

    @Test("256 entries of 64-byte names encode and decode; 257 are refused before a byte is written, and when read")
    func limits() throws {
        let full = SyncMessage.names(Self.names(256, name: String(repeating: "n", count: 64)))
        let payload = try full.encode()
        #expect(payload.count == 1 + 2 + 256 * (32 + 1 + 64))
        #expect(payload.count == full.encodedByteCount)
        #expect(try SyncMessage(payload: payload) == full)

        let over = SyncMessage.names(Self.names(257))
        #expect(throws: SyncMessageError.listTooLong(.names, 257)) { try over.encode() }
        // Written by hand, as a peer could: refused as malformed (code 6).
        var body: [UInt8] = [SyncMessageType.names.rawValue, 0x01, 0x01]
        for name in Self.names(257) { body += name.user.bytes + [0] }
        do {
            _ = try SyncMessage(payload: body)
            Issue.record("257 entries were decoded")
        } catch {
            #expect(error.vectorName == "invalidBody")
            #expect(error.code.rawValue == 6)
        }
    }

    @Test("a name over 64 bytes is cut to whole characters, as node info's; the wire never carries more")
    func longNamesAreCut() throws {
        let name = SyncMessage.UserName(user: SyncFixtures.users[0], displayName: String(repeating: "é", count: 40))
        #expect(name.displayName.utf8.count == 64)
        #expect(name.displayName == String(repeating: "é", count: 32))
        let emoji = SyncMessage.UserName(user: SyncFixtures.users[0], displayName: String(repeating: "🧵", count: 17))
        #expect(emoji.displayName == String(repeating: "🧵", count: 16))
        let message = SyncMessage.names([name, emoji])
        #expect(try SyncMessage(payload: message.encode()) == message)
    }

    @Test("read a byte at a time: every prefix is refused, the whole is read")
    func byteAtATime() throws {
        let payload = try SyncMessage.names(Self.names(3, name: "Bücherei")).encode()
        for length in 0..<payload.count {
            #expect(throws: SyncMessageError.self) { try SyncMessage(payload: Array(payload[..<length])) }
        }
        #expect(try SyncMessage(payload: payload) == .names(Self.names(3, name: "Bücherei")))
    }
}
