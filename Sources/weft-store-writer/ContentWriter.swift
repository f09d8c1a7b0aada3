// The content mode of weft-store-writer, for the content store's crash test: opens (or resumes)
// one partial content in a home's content store and writes its missing chunks in a random
// order until killed, then completes it.
//
//   weft-store-writer content <home> [--chunk-log 12] [--chunks 3000] [--seed 1] [--pause-us 0]
//                                    [--stop-after N]
//
// Prints "opened V" (V chunks verified on opening), then "written I" once chunk I's write
// returned (its record is journaled: a process killed after it keeps it), "synced N" after each
// flush (N chunk records a sync covers), and "complete" at the end. --pause-us sleeps that long
// after each chunk; --stop-after N stops after writing N chunks, prints "stopped" and waits to
// be killed, so a test that is slow to kill it does not see it complete. The content is `CrashContent` below, the same in the test (ContentCrashTests.swift).
import Foundation
import WeftCrypto
import WeftStore

/// The crash test's content: `chunks` chunks of 2^`chunkLog` bytes less 100 bytes in the last,
/// chunk i a xorshift stream seeded by (seed, i), its hash the leaf hash of SPEC.md §17.3
/// (opening checks unsynced records against it); its root BLAKE2b-256 of a text naming it.
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
}

func runContentWriter(_ arguments: [String]) -> Never {
    var arguments = arguments[...]
    guard let home = arguments.popFirst() else {
        fail("usage: weft-store-writer content <home> [--chunk-log 12] [--chunks 3000] [--seed 1] [--pause-us 0] [--stop-after N]")
    }
    var chunkLog = 12, chunks = 3000, seed = 1, pause = 0, stopAfter = Int.max
    while let flag = arguments.popFirst() {
        guard let value = arguments.popFirst().flatMap(Int.init), value >= 0 else { fail("\(flag) takes a number") }
        switch flag {
        case "--chunk-log": chunkLog = value
        case "--chunks": chunks = value
        case "--seed": seed = value
        case "--pause-us": pause = value
        case "--stop-after": stopAfter = value
        default: fail("unknown option \(flag)")
        }
    }
    do {
        let content = CrashContent(chunkLog: UInt8(clamping: chunkLog), chunks: chunks, seed: UInt64(seed))
        let store = try ContentStore(directory: URL(fileURLWithPath: home))
        guard case .partial(let partial) = try store.open(content.root, layout: content.layout) else {
            say("complete")
            exit(0)
        }
        say("opened \(partial.verifiedChunks.count)")
        for (number, index) in partial.verifiedChunks.missing.shuffled().enumerated() {
            if number == stopAfter {
                say("stopped")
                while true { sleep(60) }
            }
            try partial.write(chunk: index, bytes: content.chunk(index), hash: content.hash(index))
            say("written \(index)")
            // Now and then a flush, besides the syncs the writes start in the background.
            if number % 37 == 36 {
                try partial.flush()
                say("synced \(partial.syncedChunkCount)")
            }
            if pause > 0 { usleep(UInt32(clamping: pause)) }
        }
        try partial.flush()
        try partial.complete()
        say("complete")
        exit(0)
    } catch {
        fail("\(error)")
    }
}
