import Foundation
import NIOCore
import Testing
import WeftModel
import WeftTransfer

/// `Protocol/vectors/content.json` (SPEC.md §17).
struct ContentVectors: Decodable, Sendable {
    struct Limits: Decodable, Sendable {
        var chunkLogMin: UInt8
        var chunkLogMax: UInt8
        var maxChunkCount: Int
        var maxByteCount: String
        var descriptorByteCount: Int
        var minimumSavingPercent: Int
    }

    struct Chunking: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var byteCount: String
        var chunkLog: UInt8?
        var chunkCount: Int?
        var error: String?
        var testDescription: String { description }
    }

    struct Chunk: Decodable, Sendable {
        var index: Int
        var byteCount: Int
        var leafHash: String
        var rawFrameHex: String
    }

    struct CompressedFrame: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var index: Int
        var frameHex: String
        var testDescription: String { description }
    }

    struct Encoding: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var mimeType: String
        var compressed: Bool
        var testDescription: String { description }
    }

    struct Content: Decodable, Sendable {
        var description: String
        var byteCount: String
        var chunkLog: UInt8
        var chunkCount: Int
        var chunks: [Chunk]
        var treeLevels: [[String]]
        var root: String
        var descriptorHex: String
        var manifestHex: String
        var lastChunkMessageHex: String
        var compressedFrames: [CompressedFrame]
        var encoding: [Encoding]

        /// The content: the raw frames' payloads in order.
        var bytes: [UInt8] { chunks.flatMap { [UInt8](hex: $0.rawFrameHex).dropFirst() } }
    }

    struct ValidDescriptor: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var hex: String
        var byteCount: String
        var chunkLog: UInt8
        var root: String
        var testDescription: String { description }
    }

    struct Invalid: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var hex: String
        var error: String
        var testDescription: String { description }
    }

    struct InvalidFrame: Decodable, Sendable, CustomTestStringConvertible {
        var description: String
        var index: Int
        var frameHex: String
        var error: String
        var testDescription: String { description }
    }

    struct InvalidSet: Decodable, Sendable {
        var descriptors: [Invalid]
        var manifests: [Invalid]
        var chunkFrames: [InvalidFrame]
        var chunkMessages: [Invalid]
    }

    var limits: Limits
    var chunking: [Chunking]
    var content: Content
    var validDescriptors: [ValidDescriptor]
    var invalid: InvalidSet

    static func load() throws -> ContentVectors {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/content.json")
        return try JSONDecoder().decode(Self.self, from: Data(contentsOf: url))
    }

    /// The content's manifest, read from the vector's bytes.
    func manifest() throws -> ContentManifest {
        try ContentManifest(wire: ByteBuffer(bytes: [UInt8](hex: content.manifestHex)))
    }
}

@Suite("Protocol vectors: rich content (SPEC.md §17)")
struct ContentVectorTests {
    @Test("the limits are the vector's")
    func limits() throws {
        let limits = try ContentVectors.load().limits
        #expect(ContentDescriptor.chunkLogRange == limits.chunkLogMin...limits.chunkLogMax)
        #expect(ContentDescriptor.maxChunkCount == limits.maxChunkCount)
        #expect(String(ContentDescriptor.maxByteCount) == limits.maxByteCount)
        #expect(ContentDescriptor.encodedByteCount == limits.descriptorByteCount)
        #expect(ChunkFrame.minimumSavingPercent == limits.minimumSavingPercent)
    }

    @Test("the chunking rule gives each size its chunkLog, or refuses it", arguments: try ContentVectors.load().chunking)
    func chunking(_ vector: ContentVectors.Chunking) throws {
        let byteCount = try #require(UInt64(vector.byteCount))
        if let error = vector.error {
            let thrown = #expect(throws: ContentError.self) { try ContentChunking.chunkLog(forByteCount: byteCount) }
            #expect(thrown?.reason.rawValue == error)
            #expect(throws: ContentError.self) { try ContentManifestBuilder(byteCount: byteCount) }
        } else {
            #expect(try ContentChunking.chunkLog(forByteCount: byteCount) == vector.chunkLog)
            #expect(try ContentManifestBuilder(byteCount: byteCount).chunkCount == vector.chunkCount)
        }
    }

    @Test("building from the content gives the vector's chunk hashes, root, descriptor and manifest")
    func encode() throws {
        let content = try ContentVectors.load().content
        let bytes = content.bytes
        #expect(String(bytes.count) == content.byteCount)
        let manifest = try ContentManifestBuilder.manifest(of: bytes)
        #expect(manifest.descriptor.chunkLog == content.chunkLog)
        #expect(manifest.descriptor.chunkCount == content.chunkCount)
        #expect(manifest.hashes.map(\.hex) == content.chunks.map(\.leafHash))
        #expect(manifest.hashes.map(\.hex) == content.treeLevels[0])
        #expect(manifest.root.hex == content.root)
        #expect(manifest.descriptor.encoding.hex == content.descriptorHex)
        #expect(Array(manifest.wire.readableBytesView).hex == content.manifestHex)
        #expect(manifest.wireByteCount == content.manifestHex.utf8.count / 2)
        for chunk in content.chunks {
            #expect(manifest.descriptor.byteCount(ofChunk: chunk.index) == chunk.byteCount)
        }
    }

    @Test("the tree's levels: each node of a level is the inner hash of two below, or a lone one promoted")
    func treeLevels() throws {
        let levels = try ContentVectors.load().content.treeLevels.map { $0.map { ChunkHash(bytes: [UInt8](hex: $0))! } }
        for (below, level) in zip(levels, levels.dropFirst()) {
            #expect(level.count == (below.count + 1) / 2)
            for (position, node) in level.enumerated() {
                if 2 * position + 1 < below.count {
                    #expect(node == ContentTree.innerHash(below[2 * position], below[2 * position + 1]))
                } else {
                    #expect(node == below[2 * position])
                }
            }
        }
        #expect(levels.last?.count == 1)
        #expect(ContentTree.root(of: levels[0]).bytes == levels.last?[0].bytes)
    }

    @Test("the descriptor and manifest bytes decode to the content's fields")
    func decode() throws {
        let vectors = try ContentVectors.load()
        let content = vectors.content
        let descriptor = try ContentDescriptor(encoding: [UInt8](hex: content.descriptorHex))
        #expect(String(descriptor.byteCount) == content.byteCount)
        #expect(descriptor.chunkLog == content.chunkLog)
        #expect(descriptor.root.hex == content.root)
        let manifest = try vectors.manifest()
        #expect(manifest.descriptor == descriptor)
        #expect(manifest.hashes.map(\.hex) == content.chunks.map(\.leafHash))
    }

    @Test("each raw frame decodes to its chunk, and encoding a chunk of a compressed type gives exactly that frame")
    func rawFrames() throws {
        let vectors = try ContentVectors.load()
        let manifest = try vectors.manifest()
        let decoder = ChunkFrameDecoder()
        let encoder = ChunkFrameEncoder()
        for chunk in vectors.content.chunks {
            let frame = [UInt8](hex: chunk.rawFrameHex)
            let bytes = try decoder.decode(ByteBuffer(bytes: frame), index: chunk.index, manifest: manifest)
            #expect(bytes == Array(frame.dropFirst()))
            #expect(Array(encoder.encode(bytes, mimeType: "image/png").readableBytesView) == frame)
        }
    }

    @Test("the last chunk's message reads and decodes; writing it gives the same bytes")
    func chunkMessage() throws {
        let vectors = try ContentVectors.load()
        let manifest = try vectors.manifest()
        let wire = [UInt8](hex: vectors.content.lastChunkMessageHex)
        let message = try ChunkMessage(wire: ByteBuffer(bytes: wire))
        let last = try #require(vectors.content.chunks.last)
        #expect(message.root == manifest.root)
        #expect(Int(message.index) == last.index)
        #expect(Array(message.frame.readableBytesView).hex == last.rawFrameHex)
        #expect(try ChunkFrameDecoder().decode(message, manifest: manifest) == Array([UInt8](hex: last.rawFrameHex).dropFirst()))
        let written = ChunkMessage(root: manifest.root, index: UInt32(last.index), frame: ByteBuffer(bytes: [UInt8](hex: last.rawFrameHex)))
        #expect(Array(written.wire.readableBytesView) == wire)
    }

    @Test("compressed frames decode to their chunks", arguments: try ContentVectors.load().content.compressedFrames)
    func compressedFrames(_ vector: ContentVectors.CompressedFrame) throws {
        let vectors = try ContentVectors.load()
        let frame = [UInt8](hex: vector.frameHex)
        #expect(frame.first == ChunkFrame.compressedFlag)
        let bytes = try ChunkFrameDecoder().decode(ByteBuffer(bytes: frame), index: vector.index, manifest: try vectors.manifest())
        #expect(bytes == Array([UInt8](hex: vectors.content.chunks[vector.index].rawFrameHex).dropFirst()))
    }

    // zstd encoders may differ in the bytes they choose, so a compressed frame is checked by
    // the choice (raw or compressed) and by decoding it, not byte for byte.
    @Test("the encoder compresses or not as the vector says, and its frames decode back", arguments: try ContentVectors.load().content.encoding)
    func encoding(_ vector: ContentVectors.Encoding) throws {
        let vectors = try ContentVectors.load()
        let manifest = try vectors.manifest()
        let encoder = ChunkFrameEncoder()
        let decoder = ChunkFrameDecoder()
        for chunk in vectors.content.chunks {
            let raw = [UInt8](hex: chunk.rawFrameHex)
            let frame = encoder.encode(Array(raw.dropFirst()), mimeType: vector.mimeType)
            #expect(frame.getInteger(at: 0, as: UInt8.self) == (vector.compressed ? ChunkFrame.compressedFlag : 0))
            if !vector.compressed { #expect(Array(frame.readableBytesView) == raw) }
            #expect(try decoder.decode(frame, index: chunk.index, manifest: manifest) == Array(raw.dropFirst()))
        }
    }

    @Test("valid descriptors read to their fields and write back", arguments: try ContentVectors.load().validDescriptors)
    func validDescriptor(_ vector: ContentVectors.ValidDescriptor) throws {
        let descriptor = try ContentDescriptor(encoding: [UInt8](hex: vector.hex))
        #expect(String(descriptor.byteCount) == vector.byteCount)
        #expect(descriptor.chunkLog == vector.chunkLog)
        #expect(descriptor.root.hex == vector.root)
        let root = try #require(ContentRoot(bytes: [UInt8](hex: vector.root)))
        let written = try ContentDescriptor(byteCount: try #require(UInt64(vector.byteCount)), chunkLog: vector.chunkLog, root: root)
        #expect(written.encoding.hex == vector.hex)
    }

    @Test("invalid descriptors are refused", arguments: try ContentVectors.load().invalid.descriptors)
    func invalidDescriptor(_ vector: ContentVectors.Invalid) throws {
        let error = #expect(throws: ContentError.self) { try ContentDescriptor(encoding: [UInt8](hex: vector.hex)) }
        #expect(error?.reason.rawValue == vector.error)
    }

    @Test("invalid manifests are refused with their error", arguments: try ContentVectors.load().invalid.manifests)
    func invalidManifest(_ vector: ContentVectors.Invalid) throws {
        let error = #expect(throws: ContentError.self) { try ContentManifest(wire: ByteBuffer(bytes: [UInt8](hex: vector.hex))) }
        #expect(error?.reason.rawValue == vector.error, "\(error?.detail ?? "")")
    }

    @Test("invalid chunk frames are refused with their error", arguments: try ContentVectors.load().invalid.chunkFrames)
    func invalidFrame(_ vector: ContentVectors.InvalidFrame) throws {
        let manifest = try ContentVectors.load().manifest()
        let error = #expect(throws: ContentError.self) {
            try ChunkFrameDecoder().decode(ByteBuffer(bytes: [UInt8](hex: vector.frameHex)), index: vector.index, manifest: manifest)
        }
        #expect(error?.reason.rawValue == vector.error, "\(error?.detail ?? "")")
    }

    @Test("invalid chunk messages are refused with their error", arguments: try ContentVectors.load().invalid.chunkMessages)
    func invalidMessage(_ vector: ContentVectors.Invalid) throws {
        let manifest = try ContentVectors.load().manifest()
        let error = #expect(throws: ContentError.self) {
            try ChunkFrameDecoder().decode(ChunkMessage(wire: ByteBuffer(bytes: [UInt8](hex: vector.hex))), manifest: manifest)
        }
        #expect(error?.reason.rawValue == vector.error, "\(error?.detail ?? "")")
    }
}
