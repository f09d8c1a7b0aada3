import Foundation
import Testing

/// `weft download`: a message's part copied out of the node, with progress. Real processes.
@Suite("weft download", .serialized, .timeLimit(.minutes(3)))
struct DownloadCommandTests {
    @Test("an inline part is whole at once: --out gets its bytes, --json prints progress ending at 1; a missing part is one sentence")
    func inlinePart() async throws {
        let dir = try TemporaryDirectory()
        let (alice, _, conversation) = try await RunningNode.aliceWithConversation(in: dir)
        defer { alice.process?.terminate() }
        let message = try await alice.ok("send", arguments: [conversation, "--text", "first", "--text", "second part"])
        let out = dir.path("second.txt")
        let lines = try await alice.ok("download", arguments: [message, "--part", "2", "--out", out, "--json"])
        let progress = lines.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(progress.last?["fraction"] as? Double == 1 && progress.last?["status"] as? String == "complete", "\(lines)")
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "second part")
        // Relative to the working directory of the command, not the node's.
        let plain = try await alice.ok("download", arguments: [message, "--out", out])
        #expect(plain.hasSuffix(out), "\(plain)")
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "first")
        let refused = try await alice.refused(["download", message, "--part", "3"])
        #expect(refused.contains("has 2 part(s); there is no part 3"), "\(refused)")
    }
}

/// Rich content between two real nodes: a file sent by path becomes chunks; the recipient's
/// node fetches it; `weft download` copies it out byte for byte; `msgs` shows the transfer.
@Suite("rich content through the CLI", .serialized, .timeLimit(.minutes(3)))
struct RichContentCLITests {
    @Test("a 3 MiB file sent with --file arrives whole at bob's node and weft download copies it out; msgs shows the part's status")
    func fileRoundTrip() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start()
        try await bob.start(["--peer", alice.address])
        defer {
            alice.process?.terminate()
            bob.process?.terminate()
        }
        try await eventually("alice meets bob") { try await alice.ok("peers").hasPrefix("bob  ") }
        // Half random, half text: chunks of both kinds (raw and compressed).
        var bytes = [UInt8](repeating: 0, count: 3 << 20)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for index in 0..<(bytes.count / 2) {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes[index] = UInt8(truncatingIfNeeded: state >> 33)
        }
        let text = Array((0..<200_000).map { "line \($0) of the attachment\n" }.joined().utf8)
        bytes.replaceSubrange((bytes.count / 2)..., with: text.prefix(bytes.count - bytes.count / 2))
        let file = dir.path("attachment.bin")
        try Data(bytes).write(to: URL(fileURLWithPath: file))

        let conversation = try await alice.ok("conv new", arguments: ["bob"])
        let message = try await alice.ok("send", arguments: [conversation, "--text", "see attached", "--file", file])
        let sent = try #require((try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]])?.first)
        let part = try #require((sent["parts"] as? [[String: Any]])?.last)
        #expect(part["size"] as? Int == bytes.count)
        let content = try #require(part["content"] as? [String: Any], "a 3 MiB file is rich content, not inline")
        #expect(["awaitingUpload", "uploading", "complete"].contains(content["status"] as? String ?? ""), "\(content)")

        #expect(try await bob.run(["wait", message], ["--timeout", "20"]).status == 0)
        let out = dir.path("received.bin")
        let lines = try await bob.ok("download", arguments: [message, "--out", out, "--json"])
        let progress = lines.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let fractions = progress.compactMap { $0["fraction"] as? Double }
        #expect(fractions.last == 1 && fractions == fractions.sorted(), "monotonic, ending at 1: \(fractions)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data(bytes), "byte for byte")
        let shown = try await bob.ok("msgs", arguments: [conversation])
        #expect(shown.contains("application/octet-stream, \(bytes.count) bytes, complete"), "\(shown)")
    }
}
