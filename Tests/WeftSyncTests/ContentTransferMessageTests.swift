import Foundation
import NIOCore
import Testing
import WeftModel
@testable import WeftSync
import WeftTransfer

/// `Protocol/vectors/content-transfer.json` (SPEC.md §17.8), checked in both directions.
struct ContentTransferVectors: Decodable, Sendable {
    struct Fields: Decodable, Sendable {
        var root: String
        var holdings: String?
        var chunkCount: Int?
        var chunks: [UInt32]?
        var held: Bool?
        var manifestHex: String?
        var index: UInt32?
        var frameHex: String?
    }

    struct Message: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var type: String
        var typeByte: UInt8
        var hex: String
        var fields: Fields
        var testDescription: String { description }

        /// The message the fields describe.
        func message() throws -> ContentTransferMessage {
            let root = try #require(ContentRoot(bytes: bytes(fields.root)))
            switch type {
            case "HOLDINGS REQUEST": return .holdingsRequest(root)
            case "HOLDINGS":
                switch fields.holdings {
                case "none": return .holdings(root, .none)
                case "all": return .holdings(root, .all)
                default:
                    let count = try #require(fields.chunkCount)
                    return .holdings(root, .chunks(TransferChunkSet(chunkCount: count, chunks: (fields.chunks ?? []).map(Int.init))))
                }
            case "MANIFEST REQUEST": return .manifestRequest(root)
            case "MANIFEST":
                guard fields.held == true else { return .manifest(root, nil) }
                return .manifest(root, try ContentManifest(wire: ByteBuffer(bytes: bytes(try #require(fields.manifestHex)))))
            case "CHUNK REQUEST": return .chunkRequest(root, chunks: try #require(fields.chunks))
            case "NOT HELD": return .notHeld(root, chunks: try #require(fields.chunks))
            case "CANCEL": return .cancel(root, chunks: try #require(fields.chunks))
            case "CHUNK":
                return .chunk(ChunkMessage(
                    root: root, index: try #require(fields.index), frame: ByteBuffer(bytes: bytes(try #require(fields.frameHex)))))
            default:
                Issue.record("unknown type \(type)")
                throw CancellationError()
            }
        }
    }

    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var hex: String
        var error: String
        var errorCode: UInt16
        var testDescription: String { description }
    }

    struct Limits: Decodable, Sendable {
        var maxChunkListCount: Int
        var maxHoldingsChunkCount: Int
    }

    var limits: Limits
    var messages: [Message]
    var invalid: [Invalid]

    static func load() throws -> ContentTransferVectors {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // WeftSyncTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package
            .appendingPathComponent("Protocol/vectors/content-transfer.json")
        return try JSONDecoder().decode(Self.self, from: Data(contentsOf: url))
    }
}

@Suite("Protocol vectors: content-transfer messages (SPEC.md §17.8)")
struct ContentTransferMessageTests {
    @Test("the limits are the vectors'")
    func limits() throws {
        let limits = try ContentTransferVectors.load().limits
        #expect(ContentTransferMessage.maxChunkListCount == limits.maxChunkListCount)
        #expect(ContentDescriptor.maxChunkCount == limits.maxHoldingsChunkCount)
    }

    @Test("encoding the vector's fields gives its bytes", arguments: try ContentTransferVectors.load().messages)
    func encode(_ vector: ContentTransferVectors.Message) throws {
        let message = SyncMessage.content(try vector.message())
        #expect(message.type.rawValue == vector.typeByte)
        #expect(message.type.description == vector.type)
        #expect(try message.encode() == bytes(vector.hex))
        #expect(message.encodedByteCount == bytes(vector.hex).count)
    }

    @Test("the vector's bytes decode to its fields", arguments: try ContentTransferVectors.load().messages)
    func decode(_ vector: ContentTransferVectors.Message) throws {
        #expect(try SyncMessage(payload: bytes(vector.hex)) == .content(try vector.message()))
    }

    @Test("every proper prefix is refused (a CHUNK's only once it has no flags byte), never trapping",
          arguments: try ContentTransferVectors.load().messages)
    func prefixes(_ vector: ContentTransferVectors.Message) throws {
        let payload = bytes(vector.hex)
        // A chunk frame runs to the end of the body: a shorter CHUNK is a shorter frame,
        // which the receiver's checks refuse (§17.6), not the reader.
        let readable = vector.type == "CHUNK" ? 1 + ChunkMessage.minimumByteCount : payload.count
        for length in 0..<payload.count {
            if length >= readable {
                #expect(throws: Never.self) { try SyncMessage(payload: Array(payload[..<length])) }
            } else {
                #expect(throws: SyncMessageError.self) { try SyncMessage(payload: Array(payload[..<length])) }
            }
        }
    }

    @Test("read from a buffer a byte at a time as it grows: refused until whole, then the vector's message",
          arguments: try ContentTransferVectors.load().messages.filter { $0.type != "CHUNK" })
    func byteAtATime(_ vector: ContentTransferVectors.Message) throws {
        let payload = bytes(vector.hex)
        var buffer = ByteBuffer()
        for (offset, byte) in payload.enumerated() {
            buffer.writeInteger(byte)
            if offset < payload.count - 1 {
                #expect(throws: SyncMessageError.self) { try SyncMessage(payload: buffer) }
            }
        }
        #expect(try SyncMessage(payload: buffer) == .content(try vector.message()))
    }

    @Test("invalid bodies are refused with the vector's error and ERROR code", arguments: try ContentTransferVectors.load().invalid)
    func invalid(_ vector: ContentTransferVectors.Invalid) throws {
        do {
            let message = try SyncMessage(payload: bytes(vector.hex))
            Issue.record("decoded \(message)")
        } catch {
            #expect(error.vectorName == vector.error, "\(error)")
            #expect(error.code.rawValue == vector.errorCode)
        }
    }

    @Test("every content-transfer type has a vector")
    func everyTypeCovered() throws {
        let covered = Set(try ContentTransferVectors.load().messages.map(\.typeByte))
        #expect(covered == Set((0x0a...0x11).map(UInt8.init)))
    }

    @Test("a writer refuses what a reader refuses: empty, long, unordered or out-of-range lists; holdings of no chunks")
    func writerBounds() throws {
        let root = try #require(ContentRoot(bytes: Array(repeating: 7, count: 32)))
        let tooLong = (0..<UInt32(257)).map { $0 }
        #expect(throws: SyncMessageError.listTooLong(.chunkRequest, 257)) {
            try SyncMessage.content(.chunkRequest(root, chunks: tooLong)).encode()
        }
        for chunks: [UInt32] in [[], [2, 1], [5, 5], [16_384]] {
            #expect(throws: SyncMessageError.self) { try SyncMessage.content(.cancel(root, chunks: chunks)).encode() }
        }
        #expect(throws: SyncMessageError.self) {
            try SyncMessage.content(.holdings(root, .chunks(TransferChunkSet(chunkCount: 0)))).encode()
        }
        #expect(throws: SyncMessageError.self) {
            try SyncMessage.content(.holdings(root, .chunks(TransferChunkSet(chunkCount: 16_385)))).encode()
        }
        // The longest list and the largest bitset round-trip.
        let longest = SyncMessage.content(.notHeld(root, chunks: (0..<UInt32(256)).map { $0 * 64 }))
        #expect(try SyncMessage(payload: longest.encode()) == longest)
        let full = SyncMessage.content(.holdings(root, .chunks(.full(chunkCount: 16_384))))
        #expect(try SyncMessage(payload: full.encode()) == full)
    }

    @Test("a CHUNK's frame is a slice of the payload, not a copy; MANIFEST and CHUNK go plain, outside the stream")
    func chunkIsASliceAndPlain() throws {
        let vectors = try ContentTransferVectors.load()
        let chunk = try #require(vectors.messages.first { $0.type == "CHUNK" })
        let payload = ByteBuffer(bytes: bytes(chunk.hex))
        guard case .content(.chunk(let message)) = try SyncMessage(payload: payload) else {
            Issue.record("not a chunk")
            return
        }
        #expect(message.frame.readableBytes == payload.readableBytes - 1 - ChunkMessage.headerByteCount)
        let encoder = SyncStreamEncoder()
        for name in ["CHUNK", "MANIFEST"] {
            for vector in vectors.messages where vector.type == name {
                let plain = ByteBuffer(bytes: bytes(vector.hex))
                #expect(encoder.encode(plain) == plain)
            }
        }
        // HOLDINGS of 16,384 chunks (2 KiB of bits) is compressed as any other message.
        let holdings = try #require(vectors.messages.first { $0.fields.chunkCount == 16_384 })
        let encoded = encoder.encode(ByteBuffer(bytes: bytes(holdings.hex)))
        #expect(encoded.getInteger(at: encoded.readerIndex, as: UInt8.self) == SyncMessageType.compressed.rawValue)
    }
}
