import Foundation
import Testing

/// Text output names people: "you", and the display names of users whose nodes this node has
/// met; full identifiers with --ids and in JSON. Real processes.
@Suite("people, not keys, in the CLI's text output", .serialized, .timeLimit(.minutes(3)))
struct PeopleNotKeysTests {
    @Test("msgs, conv ls, conv show, peers and watch say you and bob; --ids and --json keep the identifiers")
    func names() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start()
        try await bob.start(["--peer", alice.address])
        defer {
            alice.process?.terminate()
            bob.process?.terminate()
        }
        let (aliceID, bobID) = (try await alice.userID(), try await bob.userID())
        try await eventually("alice meets bob") { try await alice.ok("peers").hasPrefix("bob  ") }
        let conversation = try await alice.ok("conv new", arguments: ["bob"])
        let watcher = try ChildProcess(["watch", "--home", alice.home])
        defer { watcher.terminate() }
        try await watcher.waitFor("weft: watching the node on", inStderr: true)
        let message = try await alice.ok("send", arguments: [conversation, "--text", "hello"])

        let messages = try await alice.ok("msgs", arguments: [conversation])
        #expect(messages.contains("from you"), "\(messages)")
        #expect(messages.contains("\n  bob: "), "\(messages)")
        #expect(!messages.contains(aliceID) && !messages.contains(bobID), "no keys in text: \(messages)")
        let shown = try await alice.ok("conv show", arguments: [conversation])
        #expect(shown.contains("creator: you") && shown.contains("\n  bob"), "\(shown)")
        #expect(try await alice.ok("conv ls").contains("with bob"))

        // Identifiers behind --ids, and in JSON.
        let withIDs = try await alice.ok("msgs", arguments: [conversation, "--ids"])
        #expect(withIDs.contains("from \(aliceID) (you)") && withIDs.contains("\(bobID) (bob): "), "\(withIDs)")
        let json = try #require(try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]])
        #expect(json.first?["sender"] as? String == aliceID)

        // bob's delivery receipt reaches alice's watcher by name.
        try await eventually("the watcher names bob in the delivery") { watcher.stdout.contains("delivery \(message) to bob ") }
    }

    @Test("watch --messages prints each new message with its sender's name and text; with --json the whole record")
    func receiveMode() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start()
        try await bob.start(["--peer", alice.address])
        defer {
            alice.process?.terminate()
            bob.process?.terminate()
        }
        let bobID = try await bob.userID()
        try await eventually("alice meets bob") { try await alice.ok("peers").hasPrefix("bob  ") }
        let receiver = try ChildProcess(["watch", "--messages", "--home", alice.home])
        let jsonReceiver = try ChildProcess(["watch", "--messages", "--json", "--home", alice.home])
        defer {
            receiver.terminate()
            jsonReceiver.terminate()
        }
        try await receiver.waitFor("one line per new message", inStderr: true)
        try await jsonReceiver.waitFor("one line per new message", inStderr: true)
        let conversation = try await bob.ok("conv new", arguments: ["alice"])
        let message = try await bob.ok("send", arguments: [conversation, "--text", "hello there"])

        let output = try await receiver.waitFor("bob: hello there")
        let line = try #require(output.split(separator: "\n").first { $0.contains("bob: hello there") })
        #expect(line.contains("  \(conversation)  bob: hello there"), "\(line)")
        #expect(!receiver.stdout.contains("message create"), "only messages, not every event: \(receiver.stdout)")
        _ = try await jsonReceiver.waitFor(message)
        let records = jsonReceiver.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let record = try #require(records.first { $0["type"] as? String == "newMessage" }?["message"] as? [String: Any])
        #expect(record["id"] as? String == message)
        #expect(record["sender"] as? String == bobID)
        #expect((record["parts"] as? [[String: Any]])?.first?["text"] as? String == "hello there")

        // alice's own message shows too, from "you".
        _ = try await alice.ok("send", arguments: [conversation, "--text", "hi bob"])
        _ = try await receiver.waitFor("you: hi bob")
    }
}
