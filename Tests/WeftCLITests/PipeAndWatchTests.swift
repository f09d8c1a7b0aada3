import Foundation
import Testing

/// The CLI where a newcomer meets it first: at the end of a pipe that closes early, and
/// watching a node that dies. Real processes on a temporary home.
@Suite("the CLI at the end of a closed pipe, and a watcher whose node dies", .serialized, .timeLimit(.minutes(3)))
struct PipeAndWatchTests {
    /// `bash -c SCRIPT` with the weft binary as $WEFT; its exit status and output.
    static func bash(_ script: String) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(["-c", script], environment: ["WEFT": weftBinary.path], executable: URL(fileURLWithPath: "/bin/bash"))
        let status = try await child.wait()
        return (status, child.stdout, child.stderr)
    }

    @Test("`watch | head -1` and `msgs | head -1` end quietly with status 0 once the reader has gone")
    func closedPipe() async throws {
        let dir = try TemporaryDirectory()
        let (alice, _, conversation) = try await RunningNode.aliceWithConversation(in: dir)
        defer { alice.process?.terminate() }
        // More than a pipe holds (64 KiB), so `msgs` is still writing when `head` has gone.
        let text = String(repeating: "a line of text that fills the pipe. ", count: 40)
        for _ in 0..<60 { _ = try await alice.ok("send", arguments: [conversation, "--text", text]) }

        let messages = try await Self.bash("\"$WEFT\" msgs --home '\(alice.home)' \(conversation) | head -1; echo \"status ${PIPESTATUS[0]}\"")
        #expect(messages.stdout.hasSuffix("status 0\n"), "stdout: \(messages.stdout.suffix(200)) stderr: \(messages.stderr)")
        #expect(messages.stderr.isEmpty, "\(messages.stderr)")

        // `watch` writes an event after `head` has gone: the write fails and it ends at once.
        let watch = try ChildProcess(
            ["-c", "\"$WEFT\" watch --home '\(alice.home)' | head -1; echo \"status ${PIPESTATUS[0]}\""],
            environment: ["WEFT": weftBinary.path], executable: URL(fileURLWithPath: "/bin/bash"))
        defer { watch.terminate() }
        _ = try await watch.waitFor("watching the node on", inStderr: true)
        var sent = 0
        try await eventually("the watcher to end") {
            _ = try await alice.ok("send", arguments: [conversation, "--text", "event \(sent)"])
            sent += 1
            return !watch.isRunning
        }
        #expect(try await watch.wait() == 0)
        #expect(watch.stdout.hasSuffix("status 0\n"), "stdout: \(watch.stdout) stderr: \(watch.stderr)")
        #expect(!watch.stderr.contains("Fatal error"), "\(watch.stderr)")
    }

    @Test("`watch` whose node dies ends with status 1 and one sentence")
    func nodeDies() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        try await alice.start()
        let watch = try ChildProcess(["watch", "--home", alice.home])
        defer { watch.terminate() }
        _ = try await watch.waitFor("watching the node on", inStderr: true)
        alice.process?.kill()
        #expect(try await watch.wait() == 1)
        let lines = watch.stderr.split(separator: "\n")
        #expect(lines.count == 2, "the start line and one sentence: \(watch.stderr)")
        #expect(lines.last == "weft: The node stopped: its control connection closed while watching.")
    }
}
