import Foundation
import Testing
@testable import WeftStore

#if canImport(Glibc)
import Glibc
#endif

/// A tmpfs of a few hundred KiB mounted on a fresh temporary directory, unmounted (and the
/// directory removed) when released: a disk that fills up. Mounting needs root
/// (CAP_SYS_ADMIN); `unavailable` says why it cannot be had here.
final class SmallFileSystem {
    let url: URL

    init(kibibytes: Int) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("weft-small-fs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        guard mount("tmpfs", url.path, "tmpfs", 0, "size=\(kibibytes)k,mode=0700") == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: url)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot mount a tmpfs: \(reason)"])
        }
    }

    deinit {
        _ = umount2(url.path, Int32(MNT_DETACH))
        _ = rmdir(url.path)
    }

    /// Why no small file system can be mounted here (nil if one can).
    static let unavailable: String? = {
        do {
            _ = try SmallFileSystem(kibibytes: 64)
            return nil
        } catch {
            return "disk-full tests skipped: \(error.localizedDescription) (they mount a tmpfs, which needs root)"
        }
    }()

    /// Fills the file system with a file of zeros until it is full; the file's path.
    func fill() throws -> String {
        let path = url.appendingPathComponent("filler").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown) }
        defer { close(descriptor) }
        let block = [UInt8](repeating: 0, count: 4096)
        while block.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        return path
    }
}

@Suite(
    "Content store: a full disk", .serialized,
    .enabled(if: SmallFileSystem.unavailable == nil, "\(SmallFileSystem.unavailable ?? "")"))
struct ContentDiskFullTests {
    @Test("a content larger than the free space is refused as disk full when opened, and leaves nothing behind")
    func tooLargeToOpen() throws {
        let disk = try SmallFileSystem(kibibytes: 256)
        let store = try ContentStore(directory: disk.url)
        let content = try SampleContent(size: 512 * 1024)
        expectContentError(.diskFull) { try store.open(content.root, layout: content.layout) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.path).isEmpty)
        #expect(store.holding(content.root) == .absent)
    }

    @Test("a journal that finds the disk full fails that chunk's write as disk full, keeps whole records only, and the content completes once space is freed")
    func journalFindsDiskFull() throws {
        let disk = try SmallFileSystem(kibibytes: 256)
        let store = try ContentStore(directory: disk.url)
        let content = try SampleContent(size: 128 * 1024)  // 128 chunks: past 101, the journal needs a second page
        let partial = try content.openPartial(in: store)
        try content.write(0..<64, to: partial)
        let filler = try disk.fill()

        var failure: ContentStoreError?
        for index in 64..<128 {
            do {
                try partial.write(chunk: index, bytes: content.chunk(index), hash: content.hash(index))
            } catch let error as ContentStoreError {
                failure = error
                break
            }
        }
        let error = try #require(failure, "the journal grew past its page on a full disk")
        #expect(error.code == .diskFull)
        #expect(error.message.hasPrefix("The disk is full: cannot write"), "\(error.message)")
        let held = partial.verifiedChunks
        #expect(held.count == 101 && held.containsAll(0..<101), "the chunk whose record found no room is not verified")
        #expect(
            fileSize(store.paths(content.root).journal) == ChunkJournal.headerByteCount + 101 * ChunkJournal.recordByteCount,
            "whole records only")
        // Still full: a flush's sync mark finds no room either, and the chunks stay verified.
        expectContentError(.diskFull) { try partial.flush() }
        #expect(partial.verifiedChunks.count == 101)
        #expect(partial.syncedChunkCount == 0)

        try FileManager.default.removeItem(atPath: filler)
        try content.write(partial.verifiedChunks.missing, to: partial)
        try partial.complete()
        #expect(FileManager.default.contents(atPath: store.paths(content.root).complete) == Data(content.bytes))
    }
}
