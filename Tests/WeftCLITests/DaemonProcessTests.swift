import Foundation
import Testing

/// `weft node` as a daemon and the commands that drive it through its control socket, as real
/// processes on a temporary home. (Two connected daemons do not replicate yet: only what one
/// node does alone is checked, plus what it learns from a peer's handshake.) Serialized: each
/// test starts daemons and dozens of CLI processes, and the deadline suites of the same pass
/// (loopback keepalive with a 600 ms idle timeout) must not be starved of the two cores.
@Suite("weft node's control socket and the commands, as real processes", .serialized, .timeLimit(.minutes(5)))
struct DaemonProcessTests {
    @Test("a running node answers every command, in text and JSON")
    func everyCommand() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        let carol = try await RunningNode(dir, "carol", meshKeyFrom: alice)
        try await alice.start()
        let aliceID = try await alice.userID()
        let bobID = try await bob.userID()
        let carolID = try await carol.userID()

        // The home while it runs: the address file says what the node printed; the socket is private.
        #expect(try String(contentsOfFile: "\(alice.home)/node.address", encoding: .utf8) == alice.address + "\n")
        #expect(isSocket("\(alice.home)/control.sock"))
        #expect(fileMode("\(alice.home)/control.sock") == 0o600)

        let status = try #require(try await alice.json("status") as? [String: Any])
        #expect(status["user"] as? String == aliceID)
        #expect(status["displayName"] as? String == "alice")
        #expect(status["listenAddress"] as? String == alice.address)
        #expect(status["timeToLiveSeconds"] as? Int == 43200)
        #expect(status["retentionDays"] as? Int == 30)
        #expect(status["replicating"] as? Bool == true)
        #expect(status["unsyncedOperations"] as? Int == 0, "no peer yet: nothing known to be missing")
        #expect(status["discovery"] as? Bool == false && (status["discoveryInterfaces"] as? [String])?.isEmpty == true)
        #expect(try await alice.ok("status").contains("LAN discovery: off"))
        #expect(try await alice.ok("status").contains("user: \(aliceID)"))
        #expect((try await alice.json("peers") as? [Any])?.isEmpty == true)

        // Conversations: distinct returns the same one; non-distinct makes another.
        let conversation = try await alice.ok("conv new", arguments: ["--meta", "title=Lunch", bobID])
        #expect(conversation.count == 32)
        #expect(try await alice.ok("conv new", arguments: [bobID]) == conversation)
        let other = try await alice.ok("conv new", arguments: ["--non-distinct", bobID])
        #expect(other != conversation)
        let listed = try #require(try await alice.json("conv ls") as? [[String: Any]])
        #expect(listed.map { $0["id"] as? String } == [conversation, other])
        #expect(try await alice.ok("conv ls").contains(conversation))

        let shown = try #require(try await alice.json("conv show", arguments: ["weft:///conversations/\(conversation)"]) as? [String: Any])
        #expect(Set(shown["participants"] as? [String] ?? []) == [aliceID, bobID])
        #expect(shown["distinct"] as? Bool == true)
        #expect(shown["metadata"] as? [String: String] == ["title": "Lunch"])
        #expect(shown["messageCount"] as? Int == 0)
        #expect(shown["mergedInto"] is NSNull)
        #expect(shown["unsyncedOperations"] as? Int == 0)
        #expect(try await alice.ok("conv show", arguments: [conversation]).contains("operations not yet synced: 0"))

        // Membership: add and remove carol; leave the other conversation.
        _ = try await alice.ok("conv add", arguments: [conversation, carolID])
        var participants = try #require(try await alice.json("conv show", arguments: [conversation]) as? [String: Any])["participants"] as? [String]
        #expect(Set(participants ?? []) == [aliceID, bobID, carolID])
        _ = try await alice.ok("conv remove", arguments: [conversation, carolID])
        participants = try #require(try await alice.json("conv show", arguments: [conversation]) as? [String: Any])["participants"] as? [String]
        #expect(Set(participants ?? []) == [aliceID, bobID])
        _ = try await alice.ok("conv leave", arguments: [other])
        participants = try #require(try await alice.json("conv show", arguments: [other]) as? [String: Any])["participants"] as? [String]
        #expect(participants == [bobID])

        // A watcher sees what follows.
        let watcher = try ChildProcess(["watch", "--home", alice.home, "--json"])
        defer { watcher.terminate() }
        try await watcher.waitFor("weft: watching the node on", inStderr: true)

        // Messages: a text part and a file part with its MIME type.
        let file = try dir.write("note.md", "# hi\n")
        let message = try await alice.ok("send", arguments: [conversation, "--text", "hello", "--file", "\(file):text/markdown"])
        #expect(message.count == 64)
        let messages = try #require(try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]])
        #expect(messages.count == 1)
        let first = try #require(messages.first)
        #expect(first["id"] as? String == message)
        #expect(first["sender"] as? String == aliceID)
        #expect(first["isSent"] as? Bool == false)
        let parts = try #require(first["parts"] as? [[String: Any]])
        #expect(parts.map { $0["mimeType"] as? String } == ["text/plain", "text/markdown"])
        #expect(parts.map { $0["size"] as? Int } == [5, 5])
        #expect(parts.first?["text"] as? String == "hello")
        let recipients = try #require(first["recipients"] as? [[String: Any]])
        #expect(recipients.map { $0["user"] as? String } == [bobID])
        #expect(recipients.map { $0["status"] as? String } == ["pending"])
        #expect(try await alice.ok("msgs", arguments: [conversation]).contains("part 1: text/plain, 5 bytes: \"hello\""))

        // The watcher printed the message's creation (JSON lines).
        try await eventually("the watcher's line for the message") {
            watcher.stdout.split(separator: "\n").contains { line in
                guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return false }
                return event["type"] as? String == "message" && event["change"] as? String == "create" && event["message"] as? String == message
            }
        }

        // Reading, waiting.
        _ = try await alice.ok("read", arguments: ["weft:///messages/\(message)"])
        _ = try await alice.ok("read", arguments: ["--all", conversation])
        #expect(try await alice.ok("wait", arguments: [message, "--timeout", "5"]) == message)
        #expect(try await alice.ok("wait", arguments: [conversation, "--timeout", "0"]) == conversation)
        let missing = String(repeating: "ab", count: 16)
        #expect(try await alice.refused(["wait", missing, "--timeout", "0.2"]).hasPrefix("Timed out waiting for"))

        // A peer's handshake teaches alice bob's name: `weft peers`, and names as participants.
        try await bob.start(["--peer", alice.address])
        try await eventually("alice lists bob as a peer") {
            let peers = try await alice.json("peers") as? [[String: Any]] ?? []
            return peers.count == 1 && peers[0]["displayName"] as? String == "bob"
        }
        let peers = try #require(try await alice.json("peers") as? [[String: Any]])
        #expect(peers[0]["user"] as? String == bobID)
        #expect(peers[0]["origin"] as? String == "inbound")
        // What bob holds is known, not unknown: once replicated, the one conversation alice
        // published (by sending in it); the others stay on alice's node.
        try await eventually("alice knows bob holds the published conversation") {
            let peers = try await alice.json("peers") as? [[String: Any]] ?? []
            let holdings = peers.first?["holdings"] as? [String: Any]
            return holdings?["conversations"] as? Int == 1 && (holdings?["operations"] as? Int ?? 0) >= 2
        }
        // The watcher saw the message's delivery to bob: sent (bob's node stored it), delivered.
        for status in ["sent", "delivered"] {
            try await eventually("the watcher's \(status) line for the message") {
                watcher.stdout.split(separator: "\n").contains { line in
                    guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return false }
                    return event["type"] as? String == "delivery" && event["message"] as? String == message
                        && event["recipient"] as? String == bobID && event["status"] as? String == status
                }
            }
        }
        let bobsView = try #require(try await bob.json("peers") as? [[String: Any]])
        #expect(bobsView.first?["origin"] as? String == "static")
        #expect(bobsView.first?["address"] as? String == alice.address)
        // (The first conversation stopped being distinct when carol came and went: a new one.)
        let byName = try await alice.ok("conv new", arguments: ["bob"])
        let named = try #require(try await alice.json("conv show", arguments: [byName]) as? [String: Any])
        #expect(Set(named["participants"] as? [String] ?? []) == [aliceID, bobID])

        #expect(try await bob.stop() == 0)
        #expect(try await alice.stop() == 0)
    }

    @Test("a message not delivered within the time to live fails for its recipient, and `weft watch` says why")
    func watchShowsFailure() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob")
        let bobID = try await bob.userID()
        try await alice.start(["--ttl", "1"])
        // --ids: the watcher names bob by identifier (his node never ran, so it has no name here).
        let watcher = try ChildProcess(["watch", "--home", alice.home, "--ids"])
        defer { watcher.terminate() }
        try await watcher.waitFor("weft: watching the node on", inStderr: true)
        let conversation = try await alice.ok("conv new", arguments: [bobID])
        let message = try await alice.ok("send", arguments: [conversation, "--text", "anyone there?"])
        // Bob's node never runs: the outbox expires the message (checked every few seconds).
        try await eventually("the watcher's failed line", seconds: 30) {
            watcher.stdout.contains("delivery \(message) to \(bobID) failed: expired: not delivered within 1 s")
        }
        let shown = try #require(try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]])
        let recipients = try #require(shown.first?["recipients"] as? [[String: Any]])
        #expect(recipients.map { $0["status"] as? String } == ["failed"])
        #expect(try await alice.stop() == 0)
    }

    @Test("a second node on the same home is refused with one sentence; the first keeps running")
    func secondNodeRefused() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        try await alice.start()
        let second = try await alice.refused(["node", "--listen", "127.0.0.1:0", "--discovery", "off"])
        #expect(second == "Another weft node is already running on \(alice.home); stop it first or choose another --home.")
        #expect(isSocket("\(alice.home)/control.sock"))
        #expect(try await alice.ok("status").contains("name: alice"))
        #expect(try await alice.stop() == 0)
    }

    @Test("SIGTERM stops the node with exit 0 and removes its socket and address file; then commands say no node runs")
    func stopsCleanly() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        try await alice.start()
        #expect(try await alice.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: "\(alice.home)/control.sock"))
        #expect(!FileManager.default.fileExists(atPath: "\(alice.home)/node.address"))
        let noNode = "no node is running on \(alice.home); start one with `weft node --home \(alice.home)`"
        for command in [["status"], ["peers"], ["conv", "ls"], ["watch"], ["msgs", String(repeating: "00", count: 16)]] {
            #expect(try await alice.refused(command) == noNode, "\(command)")
        }
    }

    @Test("after a crash (SIGKILL) the stale socket means no node; the next node replaces it")
    func staleSocket() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        try await alice.start()
        alice.process?.kill()
        _ = try await alice.process?.wait()
        #expect(isSocket("\(alice.home)/control.sock"))
        #expect(try await alice.refused(["status"]).hasPrefix("no node is running on"))
        try await alice.start()
        #expect(try await alice.ok("status").contains("name: alice"))
        #expect(try await alice.stop() == 0)
    }

    @Test("refused inputs: one sentence and a non-zero exit each")
    func badInputs() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start()
        let bobID = try await bob.userID()
        let conversation = try await alice.ok("conv new", arguments: [bobID])
        let unknown = String(repeating: "0f", count: 16)
        let file = try dir.write("a.txt", "a")

        let cases: [([String], String)] = [
            (["conv", "show", "xyz"], "\"xyz\" is not a conversation identifier"),
            (["conv", "show", unknown], "There is no conversation \(unknown) on this node."),
            (["msgs", unknown], "There is no conversation \(unknown)"),
            (["send", unknown, "--text", "hi"], "There is no conversation \(unknown)"),
            (["send", conversation, "--file", "\(file):text/"], "The MIME type \"text/\" is not of the form type/subtype."),
            (["send", conversation, "--file", dir.path("missing.txt")], "there is no such file"),
            (["send", conversation], "Give at least one --text or --file."),
            (["read", conversation], "is not a message identifier"),
            (["read", String(repeating: "ee", count: 32)], "There is no message"),
            (["wait", "weft:///nothing/12", "--timeout", "1"], "is not a conversation or message identifier"),
            (["conv", "new", "weft1abc"], "is not a valid user identifier"),
            (["conv", "new", "nobody"], "No user named \"nobody\" is known to this node"),
            (["conv", "new", "--meta", "novalue", bobID], "--meta \"novalue\" is not KEY=VALUE."),
            (["conv", "add", conversation], "Missing expected argument"),
            (["node", "--ttl", "0"], "--ttl must be"),
        ]
        for (words, expected) in cases {
            let sentence = try await alice.refused(words)
            #expect(sentence.contains(expected), "\(words): \(sentence)")
        }
        #expect(try await alice.stop() == 0)
    }
}
