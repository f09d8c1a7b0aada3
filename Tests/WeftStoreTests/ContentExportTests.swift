import Foundation
import Testing
@testable import WeftStore

/// The temporary file an export of `target` writes into.
private func temporaryFile(of target: URL) -> String {
    target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).weft-download").path
}

private func posixPermissions(_ path: String) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? nil
}

@Suite("Content store: copying content out to a user's file as it arrives")
struct ContentExportTests {
    @Test("chunks are copied out as they are verified, in any order; finishing copies the rest from the complete content and names the copy, a file of the user's own")
    func copiesAsChunksArrive() throws {
        let home = try TemporaryDirectory()
        let out = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 40 * 1024 - 77)
        let partial = try content.openPartial(in: store)
        let target = out.url.appendingPathComponent("report.bin")
        let export = try ContentExport(content.root, layout: content.layout, from: store, to: target.path)
        #expect(fileSize(temporaryFile(of: target)) == content.bytes.count, "the copy is sized to the content from the start")

        let order = Array(0..<content.chunkCount).shuffled()
        try content.write(order.prefix(17), to: partial)
        try export.copyVerified()
        #expect(export.copiedChunkCount == 17)
        let early = try #require(FileManager.default.contents(atPath: temporaryFile(of: target)))
        for index in order.prefix(17) {
            let start = index * content.layout.chunkSize
            #expect(Array(early[start..<start + content.chunk(index).count]) == content.chunk(index), "chunk \(index) in its place")
        }
        #expect(!FileManager.default.fileExists(atPath: target.path), "the target is named only once whole")

        try content.write(order.dropFirst(17).dropLast(), to: partial)
        try export.copyVerified()
        #expect(export.copiedChunkCount == content.chunkCount - 1)
        try content.write(order.suffix(1), to: partial)
        try partial.complete()
        try export.copyVerified()
        #expect(export.copiedChunkCount == content.chunkCount - 1, "complete content is no longer open: finish copies the rest")

        try export.finish()
        #expect(export.copiedChunkCount == content.chunkCount)
        #expect(FileManager.default.contents(atPath: target.path) == Data(content.bytes))
        #expect(!FileManager.default.fileExists(atPath: temporaryFile(of: target)))
        #expect(posixPermissions(target.path) == 0o644, "the user's copy is writable, unlike the store's")

        // The copy is a file of its own: changing it leaves the store's content alone.
        let handle = try FileHandle(forWritingTo: target)
        try handle.write(contentsOf: Data(repeating: 0x55, count: 4096))
        try handle.close()
        #expect(try store.read(content.root, layout: content.layout, chunks: 0..<content.chunkCount) == content.bytes)
        expectContentError(.closed) { try export.finish() }
    }

    @Test("content held complete is copied whole by finish; a leftover temporary file is replaced, and an earlier file of the target's name is replaced only by the whole copy")
    func completeContentAndExistingFiles() throws {
        let home = try TemporaryDirectory()
        let out = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 9 * 1024 + 1, seed: 3)
        let partial = try content.openPartial(in: store)
        try content.write(0..<content.chunkCount, to: partial)
        try partial.complete()

        let target = out.url.appendingPathComponent("photo.png")
        try Data("an older photo".utf8).write(to: target)
        try Data(repeating: 1, count: 5).write(to: URL(fileURLWithPath: temporaryFile(of: target)))
        let export = try ContentExport(content.root, layout: content.layout, from: store, to: target.path)
        try export.copyVerified()
        #expect(export.copiedChunkCount == 0)
        #expect(FileManager.default.contents(atPath: target.path) == Data("an older photo".utf8))
        try export.finish()
        #expect(FileManager.default.contents(atPath: target.path) == Data(content.bytes))
    }

    @Test("an abandoned copy removes its temporary file and leaves the target as it was")
    func abandon() throws {
        let home = try TemporaryDirectory()
        let out = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 8 * 1024, seed: 5)
        let partial = try content.openPartial(in: store)
        try content.write([2, 5], to: partial)
        let target = out.url.appendingPathComponent("notes.txt")
        try Data("mine".utf8).write(to: target)
        let export = try ContentExport(content.root, layout: content.layout, from: store, to: target.path)
        try export.copyVerified()
        #expect(export.copiedChunkCount == 2)
        export.abandon()
        #expect(!FileManager.default.fileExists(atPath: temporaryFile(of: target)))
        #expect(FileManager.default.contents(atPath: target.path) == Data("mine".utf8))
        expectContentError(.closed) { try export.copyVerified() }
    }

    @Test("a target in a directory that does not exist is refused at once, in a sentence naming it; content neither open nor complete cannot be finished")
    func refusals() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 3 * 1024, seed: 7)
        let missing = home.url.appendingPathComponent("no-such-directory/file.bin").path
        do {
            _ = try ContentExport(content.root, layout: content.layout, from: store, to: missing)
            Issue.record("a copy into a missing directory was started")
        } catch let error as ContentStoreError {
            #expect(error.code == .fileSystem)
            #expect(error.message.contains("no-such-directory"), "\(error.message)")
        }

        let out = try TemporaryDirectory()
        let target = out.url.appendingPathComponent("never.bin")
        let export = try ContentExport(content.root, layout: content.layout, from: store, to: target.path)
        expectContentError(.notHeld) { try export.finish() }
        #expect(!FileManager.default.fileExists(atPath: temporaryFile(of: target)), "a failed finish removes the temporary file")
        #expect(!FileManager.default.fileExists(atPath: target.path))
    }
}

@Suite(
    "Content store: copying content out to another file system", .serialized,
    .enabled(if: SmallFileSystem.unavailable == nil, "\(SmallFileSystem.unavailable ?? "")"))
struct ContentExportFileSystemTests {
    @Test("to a file on another file system (where the kernel does not copy), through a buffer; a full disk there fails the copy as disk full and leaves nothing")
    func otherFileSystem() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 300 * 1024 + 9, chunkLog: 16, seed: 9)
        let partial = try content.openPartial(in: store)
        try content.write(0..<content.chunkCount, to: partial)
        try partial.complete()

        let roomy = try SmallFileSystem(kibibytes: 1024)
        let target = roomy.url.appendingPathComponent("copy.bin")
        let export = try ContentExport(content.root, layout: content.layout, from: store, to: target.path)
        try export.finish()
        #expect(FileManager.default.contents(atPath: target.path) == Data(content.bytes))

        let full = try SmallFileSystem(kibibytes: 128)
        let cramped = full.url.appendingPathComponent("copy.bin")
        let failing = try ContentExport(content.root, layout: content.layout, from: store, to: cramped.path)
        expectContentError(.diskFull) { try failing.finish() }
        #expect(!FileManager.default.fileExists(atPath: temporaryFile(of: cramped)))
        #expect(!FileManager.default.fileExists(atPath: cramped.path))
    }
}
