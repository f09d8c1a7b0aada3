import Foundation
import NIOCore
import Testing
import WeftSync
import WeftWire

/// `Protocol/vectors/sync-envelope.json` (SPEC.md §14.1), checked in both directions.
struct SyncEnvelopeVectors: Decodable, Sendable {
    struct Message: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var type: String
        var typeByte: UInt8
        var bodyHex: String
        var hex: String
        var testDescription: String { description }
    }

    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var hex: String
        var error: String
        var errorCode: UInt16
        var testDescription: String { description }
    }

    struct Limits: Decodable, Sendable {
        var maxBodyByteCount: Int
        var maxPayloadByteCount: Int
    }

    var messages: [Message]
    var invalid: [Invalid]
    var limits: Limits

    static func load() throws -> SyncEnvelopeVectors {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // WeftSyncTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package
            .appendingPathComponent("Protocol/vectors/sync-envelope.json")
        return try JSONDecoder().decode(Self.self, from: Data(contentsOf: url))
    }
}

func bytes(_ hex: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var chars = hex.utf8.makeIterator()
    while let hi = chars.next(), let lo = chars.next() {
        bytes.append(UInt8(String(decoding: [hi, lo], as: UTF8.self), radix: 16)!)
    }
    return bytes
}

@Suite("Protocol vectors: sync message envelope (SPEC.md §14.1)")
struct SyncEnvelopeTests {
    @Test("encoding gives the vector's bytes", arguments: try SyncEnvelopeVectors.load().messages)
    func encode(_ vector: SyncEnvelopeVectors.Message) throws {
        let type = try #require(SyncMessageType(rawValue: vector.typeByte))
        #expect(type.description == vector.type)
        let envelope = try SyncEnvelope(type: type, body: ByteBuffer(bytes: bytes(vector.bodyHex)))
        #expect(Array(envelope.payload.readableBytesView) == bytes(vector.hex))
        #expect(envelope.encodedByteCount == bytes(vector.hex).count)
    }

    @Test("the vector's bytes decode to its type and body", arguments: try SyncEnvelopeVectors.load().messages)
    func decode(_ vector: SyncEnvelopeVectors.Message) throws {
        let envelope = try SyncEnvelope.read(from: ByteBuffer(bytes: bytes(vector.hex)))
        #expect(envelope.type.rawValue == vector.typeByte)
        #expect(envelope.type.description == vector.type)
        #expect(Array(envelope.body.readableBytesView) == bytes(vector.bodyHex))
    }

    @Test("invalid payloads are refused with the vector's error and ERROR code", arguments: try SyncEnvelopeVectors.load().invalid)
    func invalid(_ vector: SyncEnvelopeVectors.Invalid) throws {
        let payload = bytes(vector.hex)
        let expected: SyncMessageError = vector.error == "empty" ? .empty : .unknownType(payload[0])
        #expect(throws: expected) { try SyncEnvelope.read(from: ByteBuffer(bytes: payload)) }
        #expect(expected.code.rawValue == vector.errorCode)
    }

    @Test("every assigned type is in the vectors")
    func everyTypeCovered() throws {
        let covered = Set(try SyncEnvelopeVectors.load().messages.map(\.typeByte))
        #expect(covered == Set(SyncMessageType.allCases.map(\.rawValue)))
    }

    @Test("the largest body fills a DATA payload exactly; one byte more is refused both ways")
    func limits() throws {
        let limits = try SyncEnvelopeVectors.load().limits
        #expect(SyncEnvelope.maxBodyByteCount == limits.maxBodyByteCount)
        #expect(WireConstants.maxDataPayloadByteCount == limits.maxPayloadByteCount)

        let largest = try SyncEnvelope(type: .operations, body: ByteBuffer(repeating: 1, count: limits.maxBodyByteCount))
        #expect(largest.payload.readableBytes == limits.maxPayloadByteCount)
        #expect(try SyncEnvelope.read(from: largest.payload) == largest)

        let over = limits.maxBodyByteCount + 1
        #expect(throws: SyncMessageError.tooLarge(over)) {
            try SyncEnvelope(type: .operations, body: ByteBuffer(repeating: 1, count: over))
        }
        var payload = ByteBuffer(bytes: [SyncMessageType.operations.rawValue])
        payload.writeRepeatingByte(1, count: over)
        #expect(throws: SyncMessageError.tooLarge(over)) { try SyncEnvelope.read(from: payload) }
    }

    @Test("the body is read byte at a time as a slice; a truncated payload is still one message")
    func bodyIsASlice() throws {
        // The envelope has no length of its own: the DATA frame bounds it, so any prefix with
        // a known type byte is a message with a shorter body.
        let full = ByteBuffer(bytes: bytes("03" + "0102030405"))
        for length in 1...full.readableBytes {
            let envelope = try SyncEnvelope.read(from: full.getSlice(at: 0, length: length)!)
            #expect(envelope.type == .operations)
            #expect(envelope.body.readableBytes == length - 1)
        }
    }
}
