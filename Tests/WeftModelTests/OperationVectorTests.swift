import Foundation
import Testing
import WeftCrypto
@testable import WeftModel

// Golden vectors from Protocol/vectors/operations.json (SPEC.md §12), checked in both
// directions: the fields encode, hash and sign to exactly the vector's bytes, and the bytes
// decode to exactly the fields. See Protocol/vectors/README.md.

// MARK: - The file

struct OperationVectorFile: Decodable {
    struct Author: Decodable {
        let name: String
        let seed: String
        let publicKey: String
    }

    struct Vector: Decodable {
        let description: String
        let name: String
        let fields: Fields
        let bodyHex: String
        let encodingHex: String
        let id: String
        let signedHex: String
        let signature: String
        let wireHex: String
        /// Creations: the encoding with the conversation zeroed, and the identifier derived from it.
        let zeroedEncodingHex: String?
        let derivedConversation: String?
    }

    struct Fields: Decodable {
        let version: UInt8
        let kind: UInt8
        let kindName: String
        let author: String
        let conversation: String
        let sequence: String
        let timestamp: String
        let timestampMilliseconds: String
        let timestampCounter: UInt16
        let causes: [String]
        let body: Body
    }

    struct Body: Decodable {
        struct Entry: Decodable {
            let key: String
            let value: String?
        }

        struct Part: Decodable {
            struct Content: Decodable {
                let byteCount: String
                let chunkLog: UInt8
                let root: String
            }
            let mimeType: String
            let dataHex: String
            /// Rich content (kind 10): the descriptor's fields.
            let content: Content?
        }

        let distinct: Bool?
        let generation: UInt32?
        let participants: [String]?
        let metadata: [Entry]?
        let entries: [Entry]?
        let parts: [Part]?
        let notificationText: String?
        let notificationSound: String?
        let messages: [String]?
        let message: String?
    }

    struct Invalid: Decodable {
        let description: String
        let error: String
        let wireHex: String
    }

    let description: String
    let signatureDomain: String
    let conversationDomain: String
    let authors: [Author]
    let conversation: String
    let operations: [Vector]
    let invalid: [Invalid]

    static let file: OperationVectorFile = {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // WeftModelTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package
            .appendingPathComponent("Protocol/vectors/operations.json")
        return try! JSONDecoder().decode(OperationVectorFile.self, from: Data(contentsOf: url))
    }()
}

private func bytes(_ hex: String) -> [UInt8] {
    precondition(hex.utf8.count % 2 == 0, "odd-length hex in a vector file")
    var out: [UInt8] = []
    var chars = hex.utf8.makeIterator()
    while let hi = chars.next(), let lo = chars.next() { out.append(UInt8(String(decoding: [hi, lo], as: UTF8.self), radix: 16)!) }
    return out
}

private func user(_ hex: String) -> UserID { PublicIdentity(unvalidatedBytes: bytes(hex)) }
private func operationID(_ hex: String) -> OperationID { OperationID(bytes: bytes(hex))! }

extension OperationVectorFile.Fields {
    /// The operation these fields describe, built without the decoder.
    var operation: WeftModel.Operation {
        let b = body
        let operationBody: OperationBody
        switch kind {
        case 1:
            operationBody = .createConversation(
                participants: b.participants!.map(user), distinct: b.distinct!, generation: b.generation!,
                metadata: Dictionary(uniqueKeysWithValues: b.metadata!.map { ($0.key, $0.value!) }))
        case 2: operationBody = .addParticipants(b.participants!.map(user))
        case 3: operationBody = .removeParticipants(b.participants!.map(user))
        case 4: operationBody = .setMetadata(Dictionary(uniqueKeysWithValues: b.entries!.map { ($0.key, $0.value) }))
        case 5, 10:
            operationBody = .postMessage(
                parts: b.parts!.map { part in
                    guard let content = part.content else { return MessagePart(mimeType: part.mimeType, data: bytes(part.dataHex)) }
                    let descriptor = try! ContentDescriptor(
                        byteCount: UInt64(content.byteCount)!, chunkLog: content.chunkLog, root: ContentRoot(bytes: bytes(content.root))!)
                    return MessagePart(mimeType: part.mimeType, content: descriptor)
                },
                options: MessageOptions(notificationText: b.notificationText, notificationSound: b.notificationSound))
        case 6: operationBody = .delivered(b.messages!.map(operationID))
        case 7: operationBody = .read(b.messages!.map(operationID))
        case 8: operationBody = .markAllRead
        case 9: operationBody = .deleteMessage(operationID(b.message!))
        default: preconditionFailure("kind \(kind) in the vectors")
        }
        return Operation(
            author: user(author), conversation: ConversationID(bytes: bytes(conversation))!, sequence: UInt64(sequence)!,
            timestamp: HLCTimestamp(rawValue: UInt64(timestamp)!), causes: causes.map(operationID), body: operationBody)
    }
}

// MARK: - Tests

@Suite("operation vectors (Protocol/vectors/operations.json)")
struct OperationVectorTests {
    static let vectors = OperationVectorFile.file.operations
    static let identities = Dictionary(uniqueKeysWithValues: OperationVectorFile.file.authors.map { author in
        (author.publicKey, NodeIdentity(seed: SecureBytes(copying: bytes(author.seed))))
    })

    @Test("the authors' seeds give their public keys")
    func authors() {
        for author in OperationVectorFile.file.authors {
            #expect(Self.identities[author.publicKey]?.publicKey.bytes.hexString == author.publicKey)
        }
        #expect(Array(OperationVectorFile.file.signatureDomain.utf8) == SignedOperation.signatureDomain)
        #expect(Array(OperationVectorFile.file.conversationDomain.utf8) == ConversationLog.conversationDomain)
    }

    @Test("the fields encode, hash and sign to the vector's bytes", arguments: vectors.map(\.name))
    func encode(name: String) throws {
        let vector = Self.vectors.first { $0.name == name }!
        let fields = vector.fields
        let op = fields.operation
        #expect(fields.version == WeftModel.Operation.formatVersion)
        #expect(op.body.kind == fields.kind)
        #expect(HLCTimestamp(milliseconds: UInt64(fields.timestampMilliseconds)!, counter: fields.timestampCounter) == op.timestamp)
        let encoding = op.encoded()
        #expect(encoding.hexString == vector.encodingHex)
        #expect(encoding.suffix(vector.bodyHex.count / 2).hexString == vector.bodyHex)
        #expect(OperationID(hashing: encoding).hex == vector.id)
        #expect((SignedOperation.signatureDomain + bytes(vector.id)).hexString == vector.signedHex)
        let identity = try #require(Self.identities[fields.author])
        let signed = SignedOperation(signing: op, with: identity)
        #expect(signed.id.hex == vector.id)
        #expect(signed.signature.hexString == vector.signature)
        #expect(signed.wireBytes.hexString == vector.wireHex)
        if let derived = vector.derivedConversation {
            var zeroed = op
            zeroed.conversation = ConversationID(bytes: [UInt8](repeating: 0, count: 16))!
            #expect(zeroed.encoded().hexString == vector.zeroedEncodingHex)
            #expect(ConversationLog.derivedID(of: op).hex == derived)
            #expect(derived == OperationVectorFile.file.conversation)
        }
    }

    @Test("the vector's bytes decode to the fields, with that identifier and a valid signature", arguments: vectors.map(\.name))
    func decode(name: String) throws {
        let vector = Self.vectors.first { $0.name == name }!
        let expected = vector.fields.operation
        #expect(try WeftModel.Operation(decoding: bytes(vector.encodingHex)) == expected)
        let signed = try SignedOperation(wireBytes: bytes(vector.wireHex), claimedID: operationID(vector.id))
        #expect(signed.operation == expected)
        #expect(signed.id.hex == vector.id)
        #expect(signed.encoding.hexString == vector.encodingHex)
        #expect(signed.signature.hexString == vector.signature)
        #expect(signed.hasValidSignature)
        #expect(user(vector.fields.author).isValidSignature(bytes(vector.signature), for: bytes(vector.signedHex)))
    }

    @Test("applied in order, or all at once in reverse, every operation is accepted, to the same state")
    func applied() throws {
        let operations = try Self.vectors.map { try SignedOperation(wireBytes: bytes($0.wireHex)) }
        var inOrder = Replica(localUser: nil)
        for op in operations { #expect(inOrder.apply(verified: [op]).accepted == [op.id], "\(op.operation.body)") }
        var reversed = Replica(localUser: nil)
        #expect(Set(reversed.apply(verified: operations.reversed()).accepted) == Set(operations.map(\.id)))
        #expect(ReplicaDigest(reversed) == ReplicaDigest(inOrder))
        let conversation = ConversationID(bytes: bytes(OperationVectorFile.file.conversation))!
        let snapshot = try #require(inOrder.conversation(conversation))
        #expect(snapshot.participants == OperationVectorFile.file.authors.map { user($0.publicKey) }.sorted())
        #expect(snapshot.metadata == ["title": "Weft vectors"])
        #expect(!snapshot.isDistinct)
        // The message deleted, and the one with rich content after it.
        #expect(snapshot.messageCount == 1)
    }

    @Test("invalid wire forms are refused with the vector's error", arguments: OperationVectorFile.file.invalid.map(\.description))
    func invalid(description: String) {
        let vector = OperationVectorFile.file.invalid.first { $0.description == description }!
        do {
            let op = try SignedOperation(wireBytes: bytes(vector.wireHex))
            Issue.record("decoded \(op.operation.body)")
        } catch {
            #expect("\(error.reason)" == vector.error, "\(error)")
        }
    }
}
