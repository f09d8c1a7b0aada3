import Foundation
import Testing
@testable import WeftStore

#if canImport(Glibc)
import Glibc
#endif

/// How many of the file's pages are in the page cache (`mincore` over a mapping of it).
private func residentPages(of path: String) throws -> (resident: Int, total: Int) {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { throw CocoaError(.fileReadNoSuchFile) }
    defer { close(descriptor) }
    var info = stat()
    guard fstat(descriptor, &info) == 0, info.st_size > 0 else { throw CocoaError(.fileReadUnknown) }
    let size = Int(info.st_size)
    guard let mapping = mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0), mapping != MAP_FAILED else {
        throw CocoaError(.fileReadUnknown)
    }
    defer { munmap(mapping, size) }
    let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    var vector = [UInt8](repeating: 0, count: (size + pageSize - 1) / pageSize)
    guard mincore(mapping, size, &vector) == 0 else { throw CocoaError(.fileReadUnknown) }
    return (vector.filter { $0 & 1 != 0 }.count, vector.count)
}

@Suite("Content store: arriving content and the page cache")
struct ContentCacheTests {
    @Test("once a sync has made chunks durable, their pages leave the page cache; the chunks still read back")
    func syncedChunksLeaveTheCache() throws {
        let home = try TemporaryDirectory()
        // No background sync for these few chunks: only the flush syncs.
        let store = try ContentStore(directory: home.url, syncByteLimit: 16 << 20)
        let content = try SampleContent(size: 1024 * 1024, chunkLog: 14, seed: 11)
        let partial = try content.openPartial(in: store)
        let path = store.paths(content.root).partial
        try content.write(0..<16, to: partial)
        #expect(try residentPages(of: path).resident > 0, "chunks just written are in the page cache")

        try partial.flush()
        let afterSync = try residentPages(of: path)
        #expect(afterSync.resident == 0, "\(afterSync.resident) of \(afterSync.total) pages still cached after the sync")
        #expect(try partial.read(chunks: 0..<16) == Array(content.bytes[0..<16 * 16_384]))
    }
}
