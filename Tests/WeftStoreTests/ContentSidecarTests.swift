import Foundation
import Testing
@testable import WeftStore

@Suite("Content store: manifests, imports, resuming from the journal's layout, durable bytes")
struct ContentSidecarTests {
    @Test("a manifest is kept atomically beside its content, read back whole or by prefix, and removed with it")
    func manifests() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 5000)
        #expect(try store.readManifest(of: content.root) == nil)
        let manifest = Array(repeating: UInt8(7), count: 300)
        try store.writeManifest(manifest, for: content.root)
        #expect(try store.readManifest(of: content.root) == manifest)
        #expect(try store.readManifestPrefix(of: content.root, count: 41) == Array(manifest.prefix(41)))
        #expect(try store.readManifestPrefix(of: content.root, count: 1000) == manifest)
        // Written again (a stale .tmp from a crash is replaced), then removed with the content.
        _ = FileManager.default.createFile(atPath: store.paths(content.root).manifest + ".tmp", contents: Data([1]))
        try store.writeManifest([1, 2, 3], for: content.root)
        #expect(try store.readManifest(of: content.root) == [1, 2, 3])
        #expect(try store.roots().isEmpty, "a manifest alone is no content")
        #expect(try store.remove(content.root))
        #expect(try store.readManifest(of: content.root) == nil)
        expectContentError(.readTooLarge) {
            try store.writeManifest(Array(repeating: 0, count: ContentStore.maxManifestByteCount + 1), for: content.root)
        }
    }

    @Test("an import is written in pieces and named by its root; the same content imported twice is one file; a dropped one leaves nothing")
    func imports() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 10_000)
        for _ in 0..<2 {
            let importing = try store.beginImport()
            try content.bytes.withUnsafeBytes { raw in
                for start in stride(from: 0, to: raw.count, by: 3000) {
                    try importing.append(UnsafeRawBufferPointer(rebasing: raw[start..<min(start + 3000, raw.count)]))
                }
            }
            #expect(importing.byteCount == content.bytes.count)
            try importing.finish(as: content.root, layout: content.layout)
        }
        #expect(store.holding(content.root) == .complete)
        #expect(store.completeFile(of: content.root).map { FileManager.default.contents(atPath: $0.path) } == Data(content.bytes))
        let names = try FileManager.default.contentsOfDirectory(atPath: store.directory.path)
        #expect(names == [content.root.hex], "no import file is left")
        let info = try FileManager.default.attributesOfItem(atPath: store.paths(content.root).complete)
        #expect((info[.posixPermissions] as? Int) == 0o400)

        // The wrong length is refused; an import dropped, or left by a crash, goes.
        let other = try SampleContent(size: 3000, seed: 2)
        do {
            let importing = try store.beginImport()
            try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try importing.append($0) }
            expectContentError(.wrongChunkLength) { try importing.finish(as: other.root, layout: other.layout) }
        }
        _ = FileManager.default.createFile(atPath: store.directory.path + "/import-dead.tmp", contents: Data([1, 2]))
        // So does a manifest a crash left half written.
        _ = FileManager.default.createFile(atPath: store.paths(other.root).manifest + ".tmp", contents: Data([3]))
        try store.removeStaleImports()
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.path) == [content.root.hex])
    }

    @Test("an import replaces a partial content of its root that is not open")
    func importOverPartial() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 6000)
        let partial = try content.openPartial(in: store)
        try content.write([0, 2], to: partial)
        try partial.close()
        let importing = try store.beginImport()
        try content.bytes.withUnsafeBytes { try importing.append($0) }
        try importing.finish(as: content.root, layout: content.layout)
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.path) == [content.root.hex])
        guard case .complete = try store.open(content.root, layout: content.layout) else {
            Issue.record("not complete")
            return
        }
    }

    @Test("a partial content's layout is read back from its journal; verified chunks of an open one are known without the disk; verified bytes count what a restart finds")
    func journalLayoutAndVerifiedBytes() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url, syncByteLimit: 1 << 30)
        let content = try SampleContent(size: 20 * 1024 - 300)
        #expect(try store.journalLayout(of: content.root) == nil)
        let partial = try content.openPartial(in: store)
        #expect(try store.journalLayout(of: content.root) == content.layout)
        try content.write([3, 19], to: partial)
        #expect(store.verifiedChunks(of: content.root)?.verified == [3, 19])
        #expect(partial.verifiedByteCount == UInt64(1024 + content.layout.byteCount(ofChunk: 19)), "journaled, so counted")
        #expect(partial.syncedChunkCount == 0, "not yet synced")
        try partial.flush()
        #expect(partial.syncedChunkCount == 2)
        try content.write(0..<16, to: partial)
        // Sixteen written (two of them again, not counted).
        #expect(partial.verifiedByteCount == UInt64(16 * 1024 + content.layout.byteCount(ofChunk: 19)))
        try partial.close()
        #expect(store.verifiedChunks(of: content.root) == nil, "closed")
    }
}
