import Foundation
import Testing

/// Names travel through relays (SPEC.md §14.12): on a line alice–bob–carol, alice never
/// connects to carol, yet her text output names carol, because bob tells her carol's name.
/// Real processes.
@Suite("names through a relay, in the CLI's text output", .serialized, .timeLimit(.minutes(3)))
struct RelayedNamesTests {
    @Test("alice–bob–carol: conv new by name, conv show, conv ls, msgs and watch on alice say carol, never carol's key")
    func nameThroughRelay() async throws {
        let dir = try TemporaryDirectory()
        let bob = try await RunningNode(dir, "bob")
        let alice = try await RunningNode(dir, "alice", meshKeyFrom: bob)
        let carol = try await RunningNode(dir, "carol", meshKeyFrom: bob)
        try await bob.start()
        try await alice.start(["--peer", bob.address])
        try await carol.start(["--peer", bob.address])
        defer {
            alice.process?.terminate()
            bob.process?.terminate()
            carol.process?.terminate()
        }
        let carolID = try await carol.userID()
        let carolShort = String(carolID.prefix(13))
        try await eventually("bob meets alice and carol") {
            let peers = try await bob.ok("peers")
            return peers.contains("alice  ") && peers.contains("carol  ")
        }
        #expect(!(try await alice.ok("peers")).contains("carol"), "alice is not connected to carol")

        // Only a name alice knows resolves: carol's comes through bob.
        var conversation = ""
        try await eventually("alice knows carol by name") {
            let result = try await alice.run(["conv", "new"], ["carol"])
            conversation = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            return result.status == 0
        }
        let shown = try await alice.ok("conv show", arguments: [conversation])
        #expect(shown.contains("\n  carol"), "\(shown)")
        #expect(shown.contains(carolID) == false && shown.contains(carolShort) == false, "no key for carol: \(shown)")
        let listed = try await alice.ok("conv ls")
        #expect(listed.contains("with carol"), "\(listed)")
        #expect(!listed.contains(carolShort), "\(listed)")

        let receiver = try ChildProcess(["watch", "--messages", "--home", alice.home])
        defer { receiver.terminate() }
        try await receiver.waitFor("one line per new message", inStderr: true)
        _ = try await alice.ok("send", arguments: [conversation, "--text", "hi carol"])
        // carol answers once alice's conversation reached her through bob.
        try await eventually("carol answers in alice's conversation") {
            try await carol.run(["send"], [conversation, "--text", "hi alice"]).status == 0
        }
        _ = try await receiver.waitFor("carol: hi alice")
        #expect(!receiver.stdout.contains(carolShort), "\(receiver.stdout)")

        try await eventually("alice's message reaches carol, and her answer alice") {
            try await alice.ok("msgs", arguments: [conversation]).contains("from carol")
        }
        let messages = try await alice.ok("msgs", arguments: [conversation])
        #expect(messages.contains("from carol") && messages.contains("\n  carol: "), "\(messages)")
        #expect(!messages.contains(carolID) && !messages.contains(carolShort), "no key for carol in text: \(messages)")
        // JSON keeps the identifier.
        let json = try #require(try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]])
        #expect(json.contains { $0["sender"] as? String == carolID })
    }
}
