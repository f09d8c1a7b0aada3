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
