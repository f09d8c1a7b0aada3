import Foundation
import Testing
import WeftCrypto
@testable import WeftStore

/// A content to store: `size` bytes of a pattern, its root the BLAKE2b-256 of them (any 32
/// bytes do: the store treats the root as a name), each chunk's hash its leaf hash (SPEC.md
/// §17.3, which opening checks unsynced records against).
struct SampleContent {
    let bytes: [UInt8]
    let layout: ContentStore.Layout
    let root: ContentStore.Root

    init(size: Int, chunkLog: UInt8 = 10, seed: UInt8 = 1) throws {
        var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 | 1
        bytes = (0..<size).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
        layout = try ContentStore.Layout(totalSize: UInt64(size), chunkLog: chunkLog)
        root = try ContentStore.Root(BLAKE2b.hash(bytes, outputByteCount: 32))
    }

    var chunkCount: Int { Int(layout.chunkCount) }

    func chunk(_ index: Int) -> [UInt8] {
        let start = index * layout.chunkSize
        return Array(bytes[start..<min(start + layout.chunkSize, bytes.count)])
    }

    func hash(_ index: Int) -> [UInt8] { BLAKE2b.hash([0x00] + chunk(index), outputByteCount: 32) }

    /// Opens the content as partial, failing the test if it is complete.
    func openPartial(in store: ContentStore, sourceLocation: SourceLocation = #_sourceLocation) throws -> PartialContent {
        guard case .partial(let partial) = try store.open(root, layout: layout) else {
            Issue.record("content \(root) is complete", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        return partial
    }

    /// Writes `chunks` (each verified against its hash).
    func write(_ chunks: some Sequence<Int>, to partial: PartialContent) throws {
        for index in chunks { try partial.write(chunk: index, bytes: chunk(index), hash: hash(index)) }
    }
}

/// The files of a content in a store.
extension ContentStore {
    func paths(_ root: Root) -> Paths { Paths(directory: directory.path, root: root) }
}

func fileSize(_ path: String) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
}

/// Expects `body` to throw a `ContentStoreError` with `code`.
func expectContentError<T>(
    _ code: ContentStoreError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T
) {
    do {
        _ = try body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as ContentStoreError {
        #expect(error.code == code, "\(error.message)", sourceLocation: sourceLocation)
        #expect(error.message.hasSuffix("."), "one sentence: \(error.message)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

@Suite("Content store: partial content on disk, its journal, completion")
struct ContentStoreTests {
    @Test("chunks written in any order read back, from the partial content and once complete; completing renames the partial file and deletes the journal")
    func roundTrip() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 20 * 1024 - 300)
        let partial = try content.openPartial(in: store)
        #expect(partial.recovery == .created)
        #expect(store.holding(content.root) == .partial)
        let paths = store.paths(content.root)
        #expect(fileSize(paths.partial) == content.bytes.count, "the partial file is pre-sized")

        let order = Array(0..<content.chunkCount).shuffled()
        try content.write(order.prefix(12), to: partial)
        for index in order.prefix(12) {
            #expect(try partial.read(chunks: index..<index + 1) == content.chunk(index))
            #expect(try store.read(content.root, layout: content.layout, chunks: index..<index + 1) == content.chunk(index))
        }
        let missing = order[12]
        expectContentError(.chunkMissing) { try partial.read(chunks: missing..<missing + 1) }
        expectContentError(.chunkMissing) { try store.read(content.root, layout: content.layout, chunks: 0..<content.chunkCount) }
        expectContentError(.incomplete) { try partial.complete() }
        #expect(try partial.write(chunk: order[0], bytes: content.chunk(order[0]), hash: content.hash(order[0])) == false, "written once")

        try content.write(order.dropFirst(12), to: partial)
        #expect(partial.verifiedChunks.isComplete)
        #expect(try partial.read(chunks: 0..<content.chunkCount) == content.bytes)
        try partial.complete()

        #expect(store.holding(content.root) == .complete)
        #expect(!FileManager.default.fileExists(atPath: paths.partial))
        #expect(!FileManager.default.fileExists(atPath: paths.journal))
        #expect(FileManager.default.contents(atPath: paths.complete) == Data(content.bytes))
        #expect(try partial.read(chunks: 3..<5) == Array(content.bytes[3 * 1024..<5 * 1024]), "the object reads after completion")
        #expect(try store.read(content.root, layout: content.layout, chunks: 0..<content.chunkCount) == content.bytes)
        #expect(try store.read(content.root, layout: content.layout, chunks: 19..<20) == content.chunk(19), "the short last chunk")
        // Into a caller's buffer: the first bytes are the chunks', the rest untouched; a
        // buffer without room for them is refused before anything is read.
        var roomy = [UInt8](repeating: 0xee, count: 2 * 1024 + 5)
        try roomy.withUnsafeMutableBytes { try store.read(content.root, layout: content.layout, chunks: 7..<9, into: $0) }
        #expect(Array(roomy.prefix(2 * 1024)) == Array(content.bytes[7 * 1024..<9 * 1024]) && roomy.suffix(5).allSatisfy { $0 == 0xee })
        var tight = [UInt8](repeating: 0, count: 2 * 1024 - 1)
        expectContentError(.readTooLarge) {
            try tight.withUnsafeMutableBytes { try store.read(content.root, layout: content.layout, chunks: 7..<9, into: $0) }
        }
        expectContentError(.closed) { try partial.write(chunk: 0, bytes: content.chunk(0), hash: content.hash(0)) }

        // The same root again is the one file.
        guard case .complete = try store.open(content.root, layout: content.layout) else {
            Issue.record("the complete content opened as partial")
            return
        }
        #expect(try store.roots() == [content.root: .complete])
        let again = try ContentStore(directory: home.url)
        guard case .complete = try again.open(content.root, layout: content.layout) else {
            Issue.record("a new store found the complete content partial")
            return
        }
    }

    @Test("one root opens as one partial content, and a second layout for it is refused")
    func oneRootOnePartial() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 8 * 1024)
        let first = try content.openPartial(in: store)
        let second = try content.openPartial(in: store)
        #expect(first === second)
        let other = try ContentStore.Layout(totalSize: 8 * 1024, chunkLog: 11)
        expectContentError(.conflictingLayout) { try store.open(content.root, layout: other) }
        try first.close()
        // Closed, the files still say the layout.
        expectContentError(.conflictingLayout) { try store.open(content.root, layout: other) }
        #expect(try content.openPartial(in: store) !== first, "a closed partial content opens anew")
    }

    @Test("closed and opened again (in a new store), the content resumes with the chunks written; the rest completes it")
    func reopenResumes() throws {
        let home = try TemporaryDirectory()
        let content = try SampleContent(size: 64 * 1024)
        let written = Array(0..<content.chunkCount).shuffled().prefix(37)
        do {
            let store = try ContentStore(directory: home.url)
            let partial = try content.openPartial(in: store)
            try content.write(written, to: partial)
            #expect(partial.syncedChunkCount == 0, "37 KiB: no background sync yet")
            try partial.close()
            expectContentError(.closed) { try partial.read(chunks: 0..<1) }
        }
        let store = try ContentStore(directory: home.url)
        let partial = try content.openPartial(in: store)
        #expect(partial.recovery == .resumed)
        #expect(Set(partial.verifiedChunks.verified) == Set(written))
        #expect(partial.syncedChunkCount == 37, "closing synced them")
        for index in written { #expect(try partial.read(chunks: index..<index + 1) == content.chunk(index)) }
        try content.write(partial.verifiedChunks.missing, to: partial)
        try partial.complete()
        #expect(try store.read(content.root, layout: content.layout, chunks: 0..<64) == content.bytes)
    }

    @Test("each chunk's record is journaled as it is written; a sync mark follows a flush, or a background sync once the byte limit is reached")
    func recordsAndSyncMarks() async throws {
        let home = try TemporaryDirectory()
        let content = try SampleContent(size: 64 * 1024)
        let store = try ContentStore(directory: home.url)
        let partial = try content.openPartial(in: store)
        let journal = store.paths(content.root).journal
        let header = ChunkJournal.headerByteCount, record = ChunkJournal.recordByteCount
        try content.write(0..<15, to: partial)
        #expect(fileSize(journal) == header + 15 * record)
        #expect(partial.syncedChunkCount == 0)
        #expect(partial.verifiedChunks.count == 15)
        try partial.flush()
        #expect(fileSize(journal) == header + 16 * record, "15 records and a mark")
        #expect(partial.syncedChunkCount == 15)
        try partial.flush()
        #expect(fileSize(journal) == header + 16 * record, "an empty flush appends nothing")
        let marks = try #require(FileManager.default.contents(atPath: journal).map { [UInt8]($0) })
        #expect(Array(marks[(header + 15 * record)...]) == ChunkJournal.syncMark(covering: 15))

        let small = try ContentStore(directory: home.url, syncByteLimit: 3 * 1024)
        let other = try SampleContent(size: 16 * 1024, seed: 2)
        let bytesBound = try other.openPartial(in: small)
        try other.write(0..<3, to: bytesBound)
        let deadline = ContinuousClock.now + .seconds(20)
        while bytesBound.syncedChunkCount < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(bytesBound.syncedChunkCount == 3, "3 KiB written: synced in the background")
        #expect(fileSize(small.paths(other.root).journal) == header + 4 * record)
    }

    @Test("records no sync mark covers are checked against their chunk's bytes on opening: a process killed after writing keeps them all; bytes a power loss lost cut the journal at the first such record")
    func uncoveredRecordsChecked() throws {
        let home = try TemporaryDirectory()
        let content = try SampleContent(size: 16 * 1024)
        let order = [5, 1, 9, 12, 0, 7, 3, 15, 2, 8]
        do {
            // Written and never closed nor synced: as a killed process leaves them.
            let partial = try content.openPartial(in: ContentStore(directory: home.url))
            try partial.flush()
            try content.write(order.prefix(2), to: partial)
            try partial.flush()
            try content.write(order.dropFirst(2), to: partial)
        }
        var partial = try content.openPartial(in: ContentStore(directory: home.url))
        #expect(partial.recovery == .resumed)
        #expect(Set(partial.verifiedChunks.verified) == Set(order))
        #expect(partial.syncedChunkCount == 2)
        let paths = try ContentStore(directory: home.url).paths(content.root)

        // The bytes of the fifth record's chunk (chunk 0) are lost: it and the five after it go.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: paths.partial))
        try handle.seek(toOffset: 0)
        try handle.write(contentsOf: Data(repeating: 0, count: 1024))
        try handle.close()
        partial = try content.openPartial(in: ContentStore(directory: home.url))
        #expect(partial.recovery == .droppedTornRecords(6))
        #expect(Set(partial.verifiedChunks.verified) == Set(order.prefix(4)))
        try content.write(partial.verifiedChunks.missing, to: partial)
        try partial.complete()
        #expect(FileManager.default.contents(atPath: paths.complete) == Data(content.bytes))
    }

    @Test("a torn last record (a partial one) is dropped on opening and cut off the journal")
    func tornRecordDropped() throws {
        let home = try TemporaryDirectory()
        let content = try SampleContent(size: 40 * 1024)
        let paths = try writeAndClose(content, chunks: 0..<20, in: home)
        let good = fileSize(paths.journal)
        try append(Array(repeating: 0xA5, count: ChunkJournal.recordByteCount / 2), to: paths.journal)

        let partial = try content.openPartial(in: ContentStore(directory: home.url))
        #expect(partial.recovery == .droppedTornRecords(1))
        #expect(Set(partial.verifiedChunks.verified) == Set(0..<20))
        #expect(fileSize(paths.journal) == good, "cut back to the last whole record")
        // Writing goes on after the cut.
        try content.write(20..<40, to: partial)
        try partial.close()
        let reopened = try content.openPartial(in: ContentStore(directory: home.url))
        #expect(reopened.recovery == .resumed)
        #expect(reopened.verifiedChunks.isComplete)
    }

    @Test("a record whose checksum fails is cut with everything after it; the records before it are kept")
    func badChecksumDropped() throws {
        let home = try TemporaryDirectory()
        let content = try SampleContent(size: 40 * 1024)
        let paths = try writeAndClose(content, chunks: 0..<32, in: home)
        let records = try journalRecords(paths.journal)
        // Flip a bit in the last chunk record's hash: it and the sync mark after it go.
        let last = ChunkJournal.headerByteCount + 31 * ChunkJournal.recordByteCount
        try flipBit(at: last + 10, in: paths.journal)
        var partial = try content.openPartial(in: ContentStore(directory: home.url))
        #expect(partial.recovery == .droppedTornRecords(2))
        #expect(partial.verifiedChunks.count == 31)
        #expect(!partial.verifiedChunks.contains(records[31].index))
        #expect(fileSize(paths.journal) == last)
        try partial.close()

        // Record 3 of 32: records 3 on (and the mark closing wrote) are cut; never a crash.
        try flipBit(at: ChunkJournal.headerByteCount + 2 * ChunkJournal.recordByteCount + 5, in: paths.journal)
        partial = try content.openPartial(in: ContentStore(directory: home.url))
        #expect(partial.recovery == .droppedTornRecords(30))
        #expect(Set(partial.verifiedChunks.verified) == Set(records.prefix(2).map(\.index)))
        try content.write(partial.verifiedChunks.missing, to: partial)
        try partial.complete()
        #expect(FileManager.default.contents(atPath: paths.complete) == Data(content.bytes))
    }

    @Test("a record naming a chunk an earlier one named, or a mark covering more records than precede it, is cut the same way")
    func repeatedChunkAndOvercountingMarkCut() throws {
        let home = try TemporaryDirectory()
        let content = try SampleContent(size: 40 * 1024)
        let paths = try writeAndClose(content, chunks: 0..<40, in: home)
        var bytes = try #require(FileManager.default.contents(atPath: paths.journal).map { [UInt8]($0) })
        let header = ChunkJournal.headerByteCount, record = ChunkJournal.recordByteCount
        bytes.replaceSubrange((header + record)..<(header + 2 * record), with: bytes[header..<(header + record)])
        try Data(bytes).write(to: URL(fileURLWithPath: paths.journal))
        var partial = try content.openPartial(in: ContentStore(directory: home.url))
        #expect(partial.recovery == .droppedTornRecords(40))
        #expect(partial.verifiedChunks.count == 1)
        try partial.close()

        bytes = try #require(FileManager.default.contents(atPath: paths.journal).map { [UInt8]($0) })
        bytes += ChunkJournal.syncMark(covering: 5)
        try Data(bytes).write(to: URL(fileURLWithPath: paths.journal))
        partial = try content.openPartial(in: ContentStore(directory: home.url))
        #expect(partial.recovery == .droppedTornRecords(1), "a mark covering 5 after 1 record is not one Weft writes")
        #expect(partial.verifiedChunks.count == 1)
    }

    /// Ways a journal of 40 records is damaged.
    enum JournalDamage: CaseIterable, Sendable, CustomStringConvertible {
        case headerChecksum, magic, version, garbage

        func apply(to bytes: inout [UInt8]) {
            switch self {
            case .headerChecksum: bytes[20] ^= 1
            case .magic: bytes[0] = UInt8(ascii: "X")
            case .version:
                // Version 3 with its checksum right: a journal of a newer Weft.
                bytes[6] = 3
                bytes.replaceSubrange(52..<56, with: BLAKE2b.hash(Array(bytes[..<52]), outputByteCount: 4))
            case .garbage: bytes = (0..<2000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            }
        }

        var description: String {
            switch self {
            case .headerChecksum: "a header with a bad checksum"
            case .magic: "another magic"
            case .version: "another version"
            case .garbage: "garbage"
            }
        }
    }

    @Test("damaged headers and journals restart the content, whatever the bytes", arguments: JournalDamage.allCases)
    func damagedJournals(_ damage: JournalDamage) throws {
        let home = try TemporaryDirectory()
        let content = try SampleContent(size: 40 * 1024)
        let paths = try writeAndClose(content, chunks: 0..<40, in: home)
        var bytes = try #require(FileManager.default.contents(atPath: paths.journal).map { [UInt8]($0) })
        damage.apply(to: &bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: paths.journal))
        let partial = try content.openPartial(in: ContentStore(directory: home.url))
        guard case .restarted = partial.recovery else {
            Issue.record("\(damage): opened as \(partial.recovery)")
            return
        }
        #expect(partial.verifiedChunks.count == 0, "\(damage)")
    }

    @Test("leftovers of a crash: a journal shorter than its header, a journal without its partial file, a journal after completion")
    func crashLeftovers() throws {
        let home = try TemporaryDirectory()
        let content = try SampleContent(size: 8 * 1024)
        let store = try ContentStore(directory: home.url)
        let paths = store.paths(content.root)

        // A crash while creating: a partial file and a header cut short.
        _ = FileManager.default.createFile(atPath: paths.partial, contents: Data([1, 2, 3]))
        #expect(try store.roots() == [content.root: .partial], "a partial file alone is found, for retention")
        _ = FileManager.default.createFile(atPath: paths.journal, contents: Data(ChunkJournal.magic))
        var partial = try content.openPartial(in: store)
        #expect(partial.recovery == .created)
        #expect(fileSize(paths.partial) == 8 * 1024)
        try content.write(0..<4, to: partial)
        try partial.close()

        // The journal names chunks, but the partial file is gone.
        try FileManager.default.removeItem(atPath: paths.partial)
        partial = try content.openPartial(in: store)
        #expect(partial.recovery == .restarted(reason: "the journal named 4 chunks of a partial file that was missing"))
        try content.write(0..<8, to: partial)
        let journal = try #require(FileManager.default.contents(atPath: paths.journal))
        try partial.complete()

        // A crash between the rename and deleting the journal.
        _ = FileManager.default.createFile(atPath: paths.journal, contents: journal)
        #expect(store.holding(content.root) == .complete)
        guard case .complete = try store.open(content.root, layout: content.layout) else {
            Issue.record("opened as partial")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: paths.journal), "the stale journal is removed")
    }

    @Test("remove takes the content away, complete or partial; an open partial content is closed")
    func remove() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let complete = try SampleContent(size: 4 * 1024, seed: 1)
        let partial = try SampleContent(size: 4 * 1024, seed: 2)
        let done = try complete.openPartial(in: store)
        try complete.write(0..<4, to: done)
        try done.complete()
        let arriving = try partial.openPartial(in: store)
        try partial.write([1], to: arriving)
        #expect(try store.roots() == [complete.root: .complete, partial.root: .partial])

        #expect(try store.remove(complete.root))
        #expect(try store.remove(partial.root))
        #expect(try store.remove(partial.root) == false)
        #expect(try store.roots().isEmpty)
        #expect(store.holding(partial.root) == .absent)
        expectContentError(.closed) { try arriving.write(chunk: 2, bytes: partial.chunk(2), hash: partial.hash(2)) }
        expectContentError(.notHeld) { try store.read(complete.root, layout: complete.layout, chunks: 0..<1) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.path).isEmpty)
        // And it comes back from nothing.
        let again = try partial.openPartial(in: store)
        #expect(again.recovery == .created)
    }

    @Test("input out of bounds gets a typed error, never a trap")
    func bounds() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 3 * 1024 + 5)
        let partial = try content.openPartial(in: store)
        expectContentError(.chunkOutOfRange) { try partial.write(chunk: 4, bytes: [0], hash: content.hash(0)) }
        expectContentError(.chunkOutOfRange) { try partial.write(chunk: -1, bytes: content.chunk(0), hash: content.hash(0)) }
        expectContentError(.wrongChunkLength) { try partial.write(chunk: 0, bytes: content.chunk(3), hash: content.hash(0)) }
        expectContentError(.wrongChunkLength) { try partial.write(chunk: 3, bytes: content.chunk(0), hash: content.hash(0)) }
        expectContentError(.wrongHashLength) { try partial.write(chunk: 0, bytes: content.chunk(0), hash: [1, 2]) }
        expectContentError(.chunkOutOfRange) { try partial.read(chunks: 3..<5) }
        expectContentError(.chunkOutOfRange) { try store.read(content.root, layout: content.layout, chunks: -1..<1) }
        #expect(try partial.read(chunks: 2..<2) == [])
        #expect(partial.verifiedChunks.count == 0)

        expectContentError(.invalidRoot) { try ContentStore.Root([1, 2, 3]) }
        expectContentError(.invalidLayout) { try ContentStore.Layout(totalSize: 0, chunkLog: 10) }
        expectContentError(.invalidLayout) { try ContentStore.Layout(totalSize: 100, chunkLog: 9) }
        expectContentError(.invalidLayout) { try ContentStore.Layout(totalSize: 100, chunkLog: 25) }
        expectContentError(.invalidLayout) { try ContentStore.Layout(totalSize: 100, chunkLog: 255) }
        expectContentError(.invalidLayout) { try ContentStore.Layout(totalSize: 2049, chunkLog: 10, chunkCount: 2) }
        expectContentError(.invalidLayout) { try ContentStore.Layout(totalSize: .max, chunkLog: 10, chunkCount: .max) }
        expectContentError(.invalidLayout) { try ContentStore.Layout(totalSize: 1 << 35, chunkLog: 10) }
        let big = try ContentStore.Layout(totalSize: 1 << 30, chunkLog: 10)
        expectContentError(.readTooLarge) { try store.read(content.root, layout: big, chunks: 0..<(1 << 15)) }
        expectContentError(.notHeld) { try store.read(try ContentStore.Root(Array(repeating: 9, count: 32)), layout: big, chunks: 0..<1) }
    }

    @Test("VerifiedChunks: membership, counts, the first missing chunk across whole words, indices out of range")
    func verifiedChunks() {
        var chunks = VerifiedChunks(chunkCount: 200)
        #expect(chunks.firstMissing(in: 0..<200) == 0)
        for index in 0..<150 { chunks.insert(index) }
        #expect(chunks.count == 150 && !chunks.isComplete)
        #expect(chunks.firstMissing(in: 0..<200) == 150)
        #expect(chunks.firstMissing(in: 3..<150) == nil && chunks.containsAll(0..<150))
        #expect(chunks.firstMissing(in: 100..<100) == nil)
        #expect(chunks.remove(64) && !chunks.remove(64))
        #expect(chunks.firstMissing(in: 0..<150) == 64)
        #expect(!chunks.insert(200) && !chunks.insert(-1) && !chunks.contains(200) && !chunks.contains(-1))
        #expect(chunks.firstMissing(in: -2..<3) == -2)
        chunks.insert(64)
        #expect(chunks.firstMissing(in: 140..<210) == 150)
        for index in 150..<200 { chunks.insert(index) }
        #expect(chunks.isComplete && chunks.missing.isEmpty && chunks.verified == Array(0..<200))
        #expect(chunks.firstMissing(in: 190..<210) == 200, "past the end is never verified")
        #expect(VerifiedChunks(chunkCount: .max).chunkCount == ContentStore.maxChunkCount)
        #expect(VerifiedChunks(chunkCount: -5).chunkCount == 0)
    }

    @Test("the journal's header and records are the bytes SPEC.md §11.2 gives")
    func journalBytes() throws {
        let root = try ContentStore.Root(Array(repeating: 0x11, count: 32))
        let layout = try ContentStore.Layout(totalSize: 5000, chunkLog: 12, chunkCount: 2)
        let header = ChunkJournal.header(root: root, layout: layout)
        let hex = header.map { String($0, radix: 16).leftPadded() }.joined()
        #expect(hex == Self.specHeader)
        #expect(ChunkJournal.readHeader(header) == .valid(root: root, layout: layout))
        let record = ChunkJournal.record(index: 1, hash: Array(repeating: 0x22, count: 32))
        #expect(record.map { String($0, radix: 16).leftPadded() }.joined() == Self.specRecord)
        #expect(Array(header[52...]) == BLAKE2b.hash(Array(header[..<52]), outputByteCount: 4))
        let mark = ChunkJournal.syncMark(covering: 2)
        #expect(mark.map { String($0, radix: 16).leftPadded() }.joined() == Self.specSyncMark)
    }

    /// The examples in SPEC.md §11.2.
    static let specHeader =
        "57454654434a" + "02" + String(repeating: "11", count: 32) + "0000000000001388" + "0c" + "00000002" + "a33aa31b"
    static let specRecord = "00000001" + String(repeating: "22", count: 32) + "fbcb6caf"
    static let specSyncMark = "ffffffff" + "00000002" + String(repeating: "00", count: 28) + "3859a202"

    // MARK: - Helpers

    /// Writes `chunks` of `content` in a new store and closes it; the content's paths.
    func writeAndClose(_ content: SampleContent, chunks: Range<Int>, in home: TemporaryDirectory) throws -> ContentStore.Paths {
        let store = try ContentStore(directory: home.url)
        let partial = try content.openPartial(in: store)
        try content.write(chunks, to: partial)
        try partial.close()
        return store.paths(content.root)
    }

    func journalRecords(_ path: String) throws -> [(index: Int, hash: [UInt8])] {
        let file = try #require(try ContentFile.open(path, create: false))
        guard case .valid(_, let layout) = ChunkJournal.readHeader(try file.read(count: ChunkJournal.headerByteCount, at: 0)) else {
            Issue.record("no valid header")
            return []
        }
        var records: [(Int, [UInt8])] = []
        _ = try ChunkJournal.scan(file, fileSize: try file.size(), layout: layout) { records.append(($0, Array($1))) }
        return records
    }

    func append(_ bytes: [UInt8], to path: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(bytes))
        try handle.close()
    }

    func flipBit(at offset: Int, in path: String) throws {
        var bytes = try #require(FileManager.default.contents(atPath: path))
        bytes[offset] ^= 0x04
        try bytes.write(to: URL(fileURLWithPath: path))
    }
}

extension String {
    func leftPadded() -> String { count == 1 ? "0" + self : self }
}
