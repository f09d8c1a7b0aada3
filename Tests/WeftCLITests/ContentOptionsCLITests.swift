import Foundation
import Testing

/// `weft node`'s rich-content options, and the statuses `weft msgs` shows of content parts
/// on the sending and receiving nodes. Real processes.
@Suite("weft node's rich content options", .serialized, .timeLimit(.minutes(3)))
struct ContentOptionsCLITests {
    @Test("a bad size or MIME type for the content options is refused with one sentence, before the node starts")
    func refusedValues() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let cases: [([String], String)] = [
            (["node", "--auto-download-limit", "12Q"], "--auto-download-limit takes bytes, or a number with K, M or G (64K, 10M), not \"12Q\"."),
            (["node", "--auto-download-limit=-1"], "--auto-download-limit takes bytes"),
            (["node", "--auto-download-limit", "99999999999G"], "--auto-download-limit takes bytes"),
            (["node", "--auto-download-type", "image/"], "--auto-download-type takes a MIME type, type/subtype (image/png) or type/* (image/*), not \"image/\"."),
            (["node", "--auto-download-type", "image/png", "--auto-download-type", "*/png"], "not \"*/png\""),
        ]
        for (words, expected) in cases {
            let sentence = try await alice.refused(words)
            #expect(sentence.contains(expected), "\(words): \(sentence)")
        }
    }

    /// The content status of each part of the conversation's only message, as `msgs --json` shows it.
    static func statuses(on node: RunningNode, _ conversation: String) async throws -> [String] {
        let messages = try #require(try await node.json("msgs", arguments: [conversation]) as? [[String: Any]])
        let parts = try #require(messages.first?["parts"] as? [[String: Any]])
        return parts.map { ($0["content"] as? [String: Any])?["status"] as? String ?? "inline" }
    }

    @Test("on demand with --auto-download-type image/*: a PNG arrives by itself, a file of the same size waits for weft download; the sender shows what it uploaded, also after a restart")
    func onDemandByType() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start()
        try await bob.start([
            "--peer", alice.address, "--download-on-demand", "--auto-download-type", "image/*", "--auto-download-limit", "4K",
        ])
        defer {
            alice.process?.terminate()
            bob.process?.terminate()
        }
        try await eventually("alice meets bob") { try await alice.ok("peers").hasPrefix("bob  ") }
        let picture = (0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 7919 >> 3) }
        let data = (0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 104_729 >> 5) }
        let picturePath = dir.path("picture.png")
        let dataPath = dir.path("data.bin")
        try Data(picture).write(to: URL(fileURLWithPath: picturePath))
        try Data(data).write(to: URL(fileURLWithPath: dataPath))

        let conversation = try await alice.ok("conv new", arguments: ["bob"])
        let message = try await alice.ok("send", arguments: [conversation, "--file", picturePath, "--file", dataPath])
        #expect(try await bob.run(["wait", message], ["--timeout", "20"]).status == 0)
        try await eventually("bob holds the picture") { try await Self.statuses(on: bob, conversation).first == "complete" }
        #expect(try await Self.statuses(on: bob, conversation) == ["complete", "readyForDownload"], "the other part waits to be asked for")
        try await eventually("alice shows the picture uploaded") { try await Self.statuses(on: alice, conversation).first == "complete" }
        #expect(try await Self.statuses(on: alice, conversation) == ["complete", "awaitingUpload"])

        // Alice again: what was uploaded stays so, what was not still awaits upload. She dials bob.
        #expect(try await alice.stop() == 0)
        try await alice.start(["--peer", bob.address])
        #expect(try await Self.statuses(on: alice, conversation) == ["complete", "awaitingUpload"], "after a restart")
        let shown = try await alice.ok("msgs", arguments: [conversation])
        #expect(shown.contains("image/png, 150000 bytes, complete") && shown.contains("application/octet-stream, 150000 bytes, awaitingUpload"), "\(shown)")

        // Bob asks for the other part.
        try await eventually("alice and bob connected again") { try await bob.ok("peers").hasPrefix("alice  ") }
        let out = dir.path("received.bin")
        _ = try await bob.ok("download", arguments: [message, "--part", "2", "--out", out])
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data(data), "byte for byte")
        #expect(try await Self.statuses(on: bob, conversation) == ["complete", "complete"])
        try await eventually("alice shows both uploaded") { try await Self.statuses(on: alice, conversation) == ["complete", "complete"] }
        #expect(try await alice.stop() == 0)
        try await alice.start()
        #expect(try await Self.statuses(on: alice, conversation) == ["complete", "complete"], "after another restart")
    }
}
