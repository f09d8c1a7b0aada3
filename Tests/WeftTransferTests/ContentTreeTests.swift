import NIOCore
import Testing
import WeftCrypto
import WeftModel
import WeftTransfer

@Suite("The content hash tree (SPEC.md §17.3)")
struct ContentTreeTests {
    /// The tree written another way, from BLAKE2b directly: the root of n > 1 leaves is the
    /// inner hash of the root of the first 2^k (the largest power of two below n) and the root
    /// of the rest. Pairing level by level and promoting a lone last node gives the same tree.
    static func independentRoot(_ chunks: ArraySlice<[UInt8]>) -> [UInt8] {
        if chunks.count == 1 { return BLAKE2b.hash([0x00], chunks.first!, outputByteCount: 32) }
        var split = 1
        while split * 2 < chunks.count { split *= 2 }
        let left = independentRoot(chunks.prefix(split))
        let right = independentRoot(chunks.dropFirst(split))
        return BLAKE2b.hash([0x01], left, right, outputByteCount: 32)
    }

    @Test("roots of 1, 2, 3, 5 and more chunks match the independent computation", arguments: [1, 2, 3, 4, 5, 6, 7, 9, 16])
    func roots(chunkCount: Int) throws {
        let size = (chunkCount - 1) * 16_384 + 1_000
        let content = ContentSample.random.bytes(size, seed: UInt64(chunkCount))
        let manifest = try ContentManifestBuilder.manifest(of: content)
        #expect(manifest.descriptor.chunkLog == 14)
        #expect(manifest.descriptor.chunkCount == chunkCount)
        let chunks = stride(from: 0, to: size, by: 16_384).map { Array(content[$0..<min($0 + 16_384, size)]) }
        #expect(manifest.root.bytes == Self.independentRoot(chunks[...]))
        #expect(manifest.hashes.map(\.bytes) == chunks.map { BLAKE2b.hash([0x00], $0, outputByteCount: 32) })
    }

    @Test("the shapes of small trees, spelled out")
    func shapes() {
        let leaves = (0..<5).map { ContentTree.leafHash(of: [UInt8($0)]) }
        let inner = ContentTree.innerHash
        #expect(ContentTree.root(of: [leaves[0]]).bytes == leaves[0].bytes)
        #expect(ContentTree.root(of: Array(leaves[0..<2])).bytes == inner(leaves[0], leaves[1]).bytes)
        #expect(ContentTree.root(of: Array(leaves[0..<3])).bytes == inner(inner(leaves[0], leaves[1]), leaves[2]).bytes)
        #expect(
            ContentTree.root(of: leaves).bytes
                == inner(inner(inner(leaves[0], leaves[1]), inner(leaves[2], leaves[3])), leaves[4]).bytes)
    }

    @Test("a leaf and an inner node over the same bytes differ: the domain byte separates them")
    func domainSeparation() {
        let a = ContentTree.leafHash(of: [1])
        let b = ContentTree.leafHash(of: [2])
        let node = ContentTree.innerHash(a, b)
        #expect(ContentTree.leafHash(of: a.bytes + b.bytes) != node)
        #expect(ContentTree.leafHash(of: [0x01] + a.bytes + b.bytes) != node)
    }

    @Test("a manifest is refused unless it has one hash per chunk and they make the root")
    func manifestChecks() throws {
        let manifest = try ContentManifestBuilder.manifest(of: ContentSample.text.bytes(3 * 16_384 + 5))
        let descriptor = manifest.descriptor
        #expect(try ContentManifest(descriptor: descriptor, hashes: manifest.hashes) == manifest)
        let fewer = #expect(throws: ContentError.self) { try ContentManifest(descriptor: descriptor, hashes: Array(manifest.hashes.dropLast())) }
        #expect(fewer?.reason == .chunkCountMismatch)
        let none = #expect(throws: ContentError.self) { try ContentManifest(descriptor: descriptor, hashes: []) }
        #expect(none?.reason == .chunkCountMismatch)
        let swapped = [manifest.hashes[1], manifest.hashes[0]] + manifest.hashes.dropFirst(2)
        let wrong = #expect(throws: ContentError.self) { try ContentManifest(descriptor: descriptor, hashes: swapped) }
        #expect(wrong?.reason == .rootMismatch)
    }

    @Test("every prefix of a manifest's bytes is refused, and reading leaves the bytes after it")
    func manifestPrefixes() throws {
        let manifest = try ContentManifestBuilder.manifest(of: ContentSample.text.bytes(2 * 16_384 + 5))
        let wire = Array(manifest.wire.readableBytesView)
        #expect(wire.count == ContentManifest.headerByteCount + 3 * 32)
        for length in 0..<wire.count {
            var buffer = ByteBuffer(bytes: wire[0..<length])
            let error = #expect(throws: ContentError.self) { try ContentManifest(reading: &buffer) }
            #expect(error?.reason == (length < 41 ? .malformedDescriptor : .malformedManifest))
            #expect(buffer.readerIndex == 0)
        }
        var buffer = ByteBuffer(bytes: wire + [7, 8])
        #expect(try ContentManifest(reading: &buffer) == manifest)
        #expect(Array(buffer.readableBytesView) == [7, 8])
        let trailing = #expect(throws: ContentError.self) { try ContentManifest(wire: ByteBuffer(bytes: wire + [7])) }
        #expect(trailing?.reason == .malformedManifest)
    }

    @Test("the largest manifest fits one DATA frame's payload with its sync type byte")
    func largestManifest() {
        #expect(ContentManifest.maxWireByteCount == 45 + 16_384 * 32)
        #expect(ContentManifest.maxWireByteCount + 1 <= 1_048_574)
        // The largest chunk, sent raw, fits too.
        #expect(ChunkMessage.headerByteCount + 1 + (1 << 19) + 1 <= 1_048_574)
    }
}
