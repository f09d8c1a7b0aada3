import Foundation
import Synchronization
import Testing
@testable import WeftStore

@Suite("Content store: the chunk frames kept beside a content (ROOT.frames)")
struct ContentFramesTests {
    /// A frame as §17.5 has it: flags 1 and a payload (its bytes are opaque to the store).
    static func compressedFrame(_ seed: UInt8, count: Int) -> [UInt8] {
        [0x01] + (0..<count).map { UInt8(truncatingIfNeeded: Int(seed) &* 31 &+ $0) }
    }

    @Test("a compressed frame and a raw chunk's entry read back; chunks with nothing kept, or past the content, read as nil")
    func keepAndRead() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 8 * 1024)
        let frames = try #require(try store.frames(of: content.root, chunkCount: 8, create: true))
        let frame = Self.compressedFrame(3, count: 300)
        try frame.withUnsafeBytes { try frames.keep($0, of: 2) }
        try [UInt8(0)].withUnsafeBytes { try frames.keep($0, of: 5) }
        #expect(try frames.kept(2) == .frame(frame))
        #expect(try frames.kept(5) == .raw)
        #expect(try frames.kept(0) == nil)
        #expect(try frames.kept(8) == nil)
        #expect(try frames.kept(-1) == nil)
        #expect(throws: ContentStoreError.self) { try frame.withUnsafeBytes { try frames.keep($0, of: 8) } }

        // Another store (a restart) reads the same file.
        let again = try #require(try ContentStore(directory: home.url).frames(of: content.root, chunkCount: 8, create: false))
        #expect(try again.kept(2) == .frame(frame))
        #expect(try again.kept(5) == .raw)
        // A second frame goes after the first.
        let second = Self.compressedFrame(9, count: 120)
        try second.withUnsafeBytes { try again.keep($0, of: 7) }
        #expect(try again.kept(7) == .frame(second))
        #expect(try again.kept(2) == .frame(frame))
    }

    @Test("the first frames of a content, kept on several threads at once, are all kept: the file is opened once")
    func firstFramesAtOnce() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        for seed in 1...40 {
            let content = try SampleContent(size: 8 * 1024, seed: UInt8(seed))
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                do {
                    let frames = try #require(try store.frames(of: content.root, chunkCount: 8, create: true))
                    try Self.compressedFrame(UInt8(index), count: 100 + index).withUnsafeBytes { try frames.keep($0, of: index) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty)
            let frames = try #require(try ContentStore(directory: home.url).frames(of: content.root, chunkCount: 8, create: false))
            for index in 0..<8 {
                #expect(try frames.kept(index) == .frame(Self.compressedFrame(UInt8(index), count: 100 + index)), "content \(seed), chunk \(index)")
            }
        }
    }

    @Test("a frame or entry a crash tore reads as nil (the chunk is encoded again); a file for another content starts afresh")
    func tornAndForeign() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 8 * 1024)
        let path = store.paths(content.root).frames
        do {
            let frames = try #require(try store.frames(of: content.root, chunkCount: 8, create: true))
            try Self.compressedFrame(1, count: 200).withUnsafeBytes { try frames.keep($0, of: 0) }
            try Self.compressedFrame(2, count: 200).withUnsafeBytes { try frames.keep($0, of: 1) }
            try [UInt8(0)].withUnsafeBytes { try frames.keep($0, of: 2) }
        }
        var bytes = try #require(FileManager.default.contents(atPath: path).map { [UInt8]($0) })
        let framesStart = ContentFrames.headerByteCount + 8 * ContentFrames.entryByteCount
        bytes[framesStart + 50] ^= 0xff  // chunk 0's frame
        bytes[ContentFrames.headerByteCount + 2 * ContentFrames.entryByteCount + 13] ^= 1  // chunk 2's entry
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let reread = try #require(try ContentStore(directory: home.url).frames(of: content.root, chunkCount: 8, create: false))
        #expect(try reread.kept(0) == nil)
        #expect(try reread.kept(1) == .frame(Self.compressedFrame(2, count: 200)))
        #expect(try reread.kept(2) == nil)

        // The same file opened for another chunk count (not this content's): nothing of it is trusted.
        let other = try #require(try ContentStore(directory: home.url).frames(of: content.root, chunkCount: 9, create: false))
        #expect(try other.kept(1) == nil)
        #expect(fileSize(path) == ContentFrames.headerByteCount + 9 * ContentFrames.entryByteCount)
    }
}
