import Foundation
import Testing
import WeftCrypto
@testable import WeftStore

#if canImport(Glibc)
import Glibc
#endif

/// The writer's content (`CrashContent` in Sources/weft-store-writer/ContentWriter.swift; the
/// two must stay alike): `chunks` chunks of 2^`chunkLog` bytes less 100 in the last, chunk i a
/// xorshift stream seeded by (seed, i), its hash the leaf hash (§17.3), its root BLAKE2b-256 of
/// a text naming it.
struct CrashContent {
    let chunkLog: UInt8
    let chunks: Int
    let seed: UInt64

    var layout: ContentStore.Layout {
        get throws { try ContentStore.Layout(totalSize: UInt64(chunks << Int(chunkLog) - 100), chunkLog: chunkLog) }
    }

    var root: ContentStore.Root {
        get throws { try ContentStore.Root(BLAKE2b.hash(Array("weft crash content \(seed) \(chunks) \(chunkLog)".utf8), outputByteCount: 32)) }
    }

    func chunk(_ index: Int) -> [UInt8] {
        let size = index == chunks - 1 ? (1 << Int(chunkLog)) - 100 : 1 << Int(chunkLog)
        var state = (seed &* 0x9E37_79B9_7F4A_7C15) ^ (UInt64(index) &* 0xBF58_476D_1CE4_E5B9) | 1
        return (0..<size).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    func hash(_ index: Int) -> [UInt8] { BLAKE2b.hash([0x00] + chunk(index), outputByteCount: 32) }

    var arguments: [String] { ["--chunk-log", "\(chunkLog)", "--chunks", "\(chunks)", "--seed", "\(seed)"] }
}

extension WriterProcess {
    /// Every chunk the writer said it wrote (its write returned: its record is journaled).
    var writtenChunks: Set<Int> {
        Set(lines.compactMap { $0.hasPrefix("written ") ? Int($0.dropFirst("written ".count)) : nil })
    }
    var syncLineCount: Int { lines.count(where: { $0.hasPrefix("synced ") }) }
}

@Suite("Content store: crash safety (a real writer process killed with SIGKILL)")
struct ContentCrashTests {
    static let content = CrashContent(chunkLog: 12, chunks: 3000, seed: 7)

    @Test("killed at random moments while writing chunks, the reopened content holds every chunk said written (and at most the one being written besides), and every chunk its journal names has exactly its bytes; a last run completes it")
    func killedWhileWriting() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: storeWriterBinary.path),
            "\(storeWriterBinary.path) is missing: build it first (swift build --build-tests)")
        let home = try TemporaryDirectory()
        let content = Self.content
        let (root, layout) = (try content.root, try content.layout)
        var held = Set<Int>()
        var rounds = 0
        for round in 0..<6 {
            // A short pause after each chunk spreads a round over many syncs, so the kill lands
            // anywhere among writes, appends and syncs. The writer stops after 400 chunks
            // (6 × 400 < 3000), in case the test is slow to kill it (a busy machine).
            let writer = try WriterProcess(
                arguments: ["content", home.url.path] + content.arguments + ["--pause-us", "300", "--stop-after", "400"])
            try await writer.wait(until: { $0.syncLineCount >= 1 + round % 3 })
            let delay = Duration.microseconds(Int.random(in: 0...30_000))
            try await Task.sleep(for: delay)
            try await writer.kill()
            let said = writer.writtenChunks
            #expect(!said.isEmpty, "round \(round) wrote something")
            rounds += 1

            let store = try ContentStore(directory: home.url)
            guard case .partial(let partial) = try store.open(root, layout: layout) else {
                Issue.record("round \(round): the content completed before the kill")
                return
            }
            #expect(partial.recovery == .resumed, "round \(round): opened as \(partial.recovery) (a killed process loses no record)")
            let verified = Set(partial.verifiedChunks.verified)
            let expected = held.union(said)
            #expect(expected.isSubset(of: verified), "round \(round): \(expected.subtracting(verified).count) chunks said written are missing")
            #expect(verified.subtracting(expected).count <= 1, "round \(round): only the chunk being written may be held unsaid")

            // Every record names its chunk's hash, and the partial file holds exactly those bytes.
            let journal = try #require(try ContentFile.open(store.paths(root).journal, create: false))
            var records: [(index: Int, hash: [UInt8])] = []
            _ = try ChunkJournal.scan(journal, fileSize: try journal.size(), layout: layout) { records.append(($0, Array($1))) }
            #expect(Set(records.map(\.index)) == verified)
            var wrong = 0
            for record in records {
                let bytes = try partial.read(chunks: record.index..<record.index + 1)
                if record.hash != content.hash(record.index) || BLAKE2b.hash([0x00] + bytes, outputByteCount: 32) != record.hash { wrong += 1 }
            }
            #expect(wrong == 0, "round \(round): \(wrong) chunks named by the journal do not hold their bytes")
            let moment = writer.lines.contains("stopped") ? "after it stopped" : "\(delay) after \(writer.syncLineCount) flushes"
            print("content crash round \(round): killed \(moment); \(said.count) chunks said written, \(verified.count) held, \(partial.syncedChunkCount) synced")
            // What the journal holds now: the next round must keep it.
            held = verified
            try partial.close()
        }
        #expect(rounds == 6)

        // A last run, not killed, completes it.
        let writer = try WriterProcess(arguments: ["content", home.url.path] + content.arguments)
        let deadline = ContinuousClock.now + .seconds(120)
        while writer.process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        if writer.process.isRunning {
            Issue.record("the last writer did not complete in 120 s; output: \(writer.lines.suffix(3))")
            try await writer.kill()
            return
        }
        try await Task.sleep(for: .milliseconds(100))  // the last output
        #expect(writer.process.terminationReason == .exit && writer.process.terminationStatus == 0)
        #expect(writer.lines.last == "complete")
        let store = try ContentStore(directory: home.url)
        #expect(store.holding(root) == .complete)
        let complete = try #require(FileManager.default.contents(atPath: store.paths(root).complete))
        #expect(complete == Data((0..<content.chunks).flatMap { content.chunk($0) }))
        #expect(!FileManager.default.fileExists(atPath: store.paths(root).journal))
    }
}
