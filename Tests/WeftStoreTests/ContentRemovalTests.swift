import Foundation
import Testing
@testable import WeftStore

/// Removing content for retention (SPEC.md §11.2 "Removing"): every name of a content goes,
/// unless a file of it changed since the caller's cutoff.
@Suite("Content store: removing content no message refers to")
struct ContentRemovalTests {
    @Test("a content unchanged since the cutoff loses its names, complete, partial or a manifest alone; one changed at or after it stays")
    func removesUnlessChanged() throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let complete = try SampleContent(size: 4 * 1024, seed: 1)
        let partial = try SampleContent(size: 4 * 1024, seed: 2)
        let manifestOnly = try SampleContent(size: 4 * 1024, seed: 3)
        let done = try complete.openPartial(in: store)
        try complete.write(0..<4, to: done)
        try done.complete()
        try store.writeManifest([1, 2, 3], for: complete.root)
        // Its frames and an upload mark go with it.
        let frames = try #require(try store.frames(of: complete.root, chunkCount: 4, create: true))
        try [UInt8(0)].withUnsafeBytes { try frames.keep($0, of: 0) }
        _ = FileManager.default.createFile(atPath: store.paths(complete.root).upload, contents: Data())
        let arriving = try partial.openPartial(in: store)
        try partial.write([1], to: arriving)
        try store.writeManifest([4, 5, 6], for: partial.root)
        try store.writeManifest([7, 8, 9], for: manifestOnly.root)
        let roots = [complete.root, partial.root, manifestOnly.root]
        #expect(try store.heldRoots() == Set(roots), "a manifest alone counts")
        for root in roots { #expect(try store.lastChange(of: root) != nil) }

        // Everything changed after a cutoff long past: nothing goes, the open content still writes.
        for root in roots { #expect(try store.removeUnlessChanged(root, since: .distantPast) == .changedLately) }
        try partial.write([2], to: arriving)
        #expect(try store.heldRoots() == Set(roots))

        for root in roots { #expect(try store.removeUnlessChanged(root, since: .distantFuture) == .removed) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.path).isEmpty, "every name gone")
        #expect(try store.heldRoots().isEmpty)
        expectContentError(.closed) { try arriving.write(chunk: 3, bytes: partial.chunk(3), hash: partial.hash(3)) }
        #expect(try store.removeUnlessChanged(partial.root, since: .distantFuture) == .absent)
        #expect(try store.lastChange(of: partial.root) == nil)
        // It comes back from nothing when wanted again.
        #expect(try partial.openPartial(in: store).recovery == .created)
    }

    @Test("importing content held already marks it changed: a removal with a cutoff between the two imports keeps it")
    func importTouches() async throws {
        let home = try TemporaryDirectory()
        let store = try ContentStore(directory: home.url)
        let content = try SampleContent(size: 10_000)
        func importIt() throws {
            let importing = try store.beginImport()
            try content.bytes.withUnsafeBytes { try importing.append($0) }
            try importing.finish(as: content.root, layout: content.layout)
        }
        try importIt()
        let first = try #require(try store.lastChange(of: content.root))
        // File times follow the kernel's coarse clock: import again until it has moved on.
        let deadline = ContinuousClock.now + .seconds(10)
        var second = first
        while second <= first, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
            try importIt()
            second = try #require(try store.lastChange(of: content.root))
        }
        #expect(second > first, "the second import marked the held content changed")
        #expect(try store.removeUnlessChanged(content.root, since: second) == .changedLately)
        #expect(store.holding(content.root) == .complete)
        #expect(try store.removeUnlessChanged(content.root, since: second.addingTimeInterval(0.001)) == .removed)
        #expect(store.holding(content.root) == .absent)
    }
}
