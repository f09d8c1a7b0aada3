import Foundation
import Testing

/// Input as a newcomer types it: mistyped commands, standard input, a MIME type without its
/// slash, a directory where a file belongs, `--version`. Real `weft` processes.
@Suite("the CLI's input: suggestions, standard input, mistakes in --file", .serialized, .timeLimit(.minutes(3)))
struct NewcomerInputTests {
    @Test("a mistyped command names the nearest one, at the top level and under conv", arguments: [
        (["sned"], "\"sned\" is not a command of weft. Did you mean \"weft send\"?"),
        (["stauts", "--json"], "\"stauts\" is not a command of weft. Did you mean \"weft status\"?"),
        (["conv", "shwo"], "\"shwo\" is not a command of weft conv. Did you mean \"weft conv show\"?"),
        (["zzzzzz"], "\"zzzzzz\" is not a command of weft. Run \"weft --help\" for the list."),
    ])
    func suggestions(arguments: [String], sentence: String) async throws {
        let result = try await weft(arguments)
        #expect(result.status == 64)
        #expect(result.stderr == "weft: \(sentence)\n")
    }

    @Test("--version prints the version")
    func version() async throws {
        let result = try await weft(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("weft 0."), "\(result.stdout)")
    }

    @Test("--file with a MIME type missing its slash, or a directory, is refused with what to do")
    func fileMistakes() async throws {
        let dir = try TemporaryDirectory()
        let note = try dir.write("note.txt", "hello\n")
        let conversation = String(repeating: "ab", count: 16)
        let home = dir.path("nohome")
        let slashless = try await weft(["send", "--home", home, conversation, "--file", "\(note):textplain"])
        #expect(slashless.status == 1)
        #expect(slashless.stderr == "weft: The MIME type \"textplain\" after \(note) has no slash: write it as type/subtype, for example text/plain.\n")
        let directory = try await weft(["send", "--home", home, conversation, "--file", dir.path("")])
        #expect(directory.status == 1)
        #expect(directory.stderr.hasSuffix(" is a directory: --file takes a file.\n"), "\(directory.stderr)")
        let twice = try await weft(["send", "--home", home, conversation, "--text", "-", "--file", "-"])
        #expect(twice.status == 64)
        #expect(twice.stderr.contains("Only one part can be read from standard input (-)."), "\(twice.stderr)")
    }

    @Test("--text - and --file - read standard input")
    func standardInput() async throws {
        let dir = try TemporaryDirectory()
        let (alice, _, conversation) = try await RunningNode.aliceWithConversation(in: dir)
        defer { alice.process?.terminate() }
        let text = try await PipeAndWatchTests.bash("echo 'from a pipe' | \"$WEFT\" send --home '\(alice.home)' \(conversation) --text -")
        #expect(text.status == 0, "\(text.stderr)")
        let file = try await PipeAndWatchTests.bash("printf 'a,b\\n1,2\\n' | \"$WEFT\" send --home '\(alice.home)' \(conversation) --file=-:text/csv")
        #expect(file.status == 0, "\(file.stderr)")
        let messages = try #require(try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]])
        let parts = messages.compactMap { ($0["parts"] as? [[String: Any]])?.first }
        #expect(parts.map { $0["mimeType"] as? String } == ["text/plain", "text/csv"])
        #expect(parts.first?["text"] as? String == "from a pipe", "one trailing newline dropped")
        #expect(parts.last?["size"] as? Int == 8)
    }

    @Test("a loopback --listen turns discovery off and says so; a port in use and a home without an identity each get one sentence")
    func startingMistakes() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        // No --discovery: a loopback listener turns it off (it used to be refused).
        let node = try ChildProcess(["node", "--home", alice.home, "--listen", "127.0.0.1:0"])
        defer { node.terminate() }
        let output = try await node.waitFor("listening on ")
        let address = String(try #require(lines(output).first { $0.hasPrefix("listening on ") }).dropFirst("listening on ".count))
        #expect(node.stderr.contains("weft: LAN discovery is off: 127.0.0.1 is loopback"), "\(node.stderr)")

        let taken = try await weft(["node", "--home", bob.home, "--listen", address])
        #expect(taken.status == 1)
        #expect(lines(taken.stderr).last == "weft: Cannot listen on \(address): the port is in use (by another node or program); choose another with --listen HOST:PORT, or port 0 for a free one.")
        // (An unknown host is not tried here: resolving one would ask the machine's DNS
        // resolver, off loopback.)
        let empty = dir.path("empty")
        let status = try await weft(["status", "--home", empty])
        #expect(status.status == 1)
        #expect(status.stderr == "weft: \(empty) holds no Weft identity, so no node runs there; create one with `weft init --home \(empty)`, then start it with `weft node --home \(empty)`\n")
    }

    @Test("msgs --limit, --since and --unread pick messages; wait needs no --timeout")
    func messageFilters() async throws {
        let dir = try TemporaryDirectory()
        let (alice, _, conversation) = try await RunningNode.aliceWithConversation(in: dir)
        defer { alice.process?.terminate() }
        var sent: [String] = []
        for text in ["one", "two", "three"] { sent.append(try await alice.ok("send", arguments: [conversation, "--text", text])) }
        func ids(_ arguments: [String]) async throws -> [String] {
            try #require(try await alice.json("msgs", arguments: [conversation] + arguments) as? [[String: Any]]).compactMap { $0["id"] as? String }
        }
        #expect(try await ids([]) == sent)
        #expect(try await ids(["--limit", "2"]) == Array(sent.suffix(2)))
        #expect(try await ids(["--since", "1970-01-02"]) == sent)
        #expect(try await ids(["--since", "2999-01-01T00:00:00Z"]).isEmpty)
        #expect(try await ids(["--unread"]).isEmpty, "the local user's own messages are never unread")
        let bad = try await alice.run(["msgs"], [conversation, "--since", "yesterday"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--since takes an ISO 8601 date or time"), "\(bad.stderr)")
        // No --timeout: the default applies, and what exists is found at once.
        #expect(try await alice.ok("wait", arguments: [sent[0]]) == sent[0])

        // Commands that change something say what they did, as JSON with --json.
        let read = try #require(try await alice.json("read", arguments: [sent[0]]) as? [String: String])
        #expect(read == ["read": "message", "message": sent[0]])
        #expect(try await alice.ok("read", arguments: ["--all", conversation]) == "marked every message of \(conversation) read")
        let carol = try await RunningNode(dir, "carol", meshKeyFrom: alice)
        let carolID = try await carol.userID()
        let added = try #require(try await alice.json("conv add", arguments: [conversation, carolID]) as? [String: Any])
        #expect(added["added"] as? [String] == [carolID])
        #expect(try await alice.ok("conv remove", arguments: [conversation, carolID]) == "removed \(carolID) from \(conversation)")
        // An error with --json is a JSON object on standard error.
        let unknown = String(repeating: "cd", count: 16)
        let failed = try await alice.run(["msgs"], [unknown, "--json"])
        #expect(failed.status == 1)
        let error = try #require(try JSONSerialization.jsonObject(with: Data(failed.stderr.utf8)) as? [String: String])
        #expect(error["error"]?.hasPrefix("There is no conversation") == true, "\(failed.stderr)")
    }

    @Test("a user identifier in upper case or with blanks around it is read as one (§9), not looked up as a name")
    func identifierForms() async throws {
        let dir = try TemporaryDirectory()
        let (alice, bob, _) = try await RunningNode.aliceWithConversation(in: dir)
        defer { alice.process?.terminate() }
        let bobID = try await bob.userID()
        for form in [bobID.uppercased(), "  \(bobID)\n", " WEFT1" + bobID.dropFirst(5)] {
            let conversation = try await alice.ok("conv new", arguments: [form])
            let shown = try #require(try await alice.json("conv show", arguments: [conversation]) as? [String: Any])
            #expect((shown["participants"] as? [String])?.contains(bobID) == true, "\(form): \(shown)")
        }
        // One character changed (never to itself): the checksum catches it.
        let last = bobID.last == "q" ? "r" : "q"
        let mistyped = try await alice.refused(["conv", "new", "WEFT1" + bobID.dropFirst(5).dropLast() + last])
        #expect(mistyped.contains("is not a valid user identifier"), "\(mistyped)")
    }

    @Test("JSON names a changed property as the record does, and an empty value is null")
    func jsonNames() async throws {
        let dir = try TemporaryDirectory()
        let (alice, _, conversation) = try await RunningNode.aliceWithConversation(in: dir)
        defer { alice.process?.terminate() }
        let watcher = try ChildProcess(["watch", "--home", alice.home, "--json"])
        defer { watcher.terminate() }
        try await watcher.waitFor("weft: watching the node on", inStderr: true)
        _ = try await alice.ok("send", arguments: [conversation, "--text", "hi"])
        var properties: Set<String> = []
        try await eventually("the watcher sees the conversation's count change") {
            properties = Set(watcher.stdout.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["property"] as? String
            })
            return properties.contains("messageCount")
        }
        #expect(properties.isDisjoint(with: ["totalMessageCount", "unreadMessageCount", "mergedIdentifiers", ""]), "\(properties)")
        let created = watcher.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["change"] as? String == "create" }
        #expect(created?["property"] is NSNull, "a creation names no property: null, not \"\"")
        let messages = try #require(try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]])
        let recipient = try #require((messages.first?["recipients"] as? [[String: Any]])?.first)
        #expect(recipient["reason"] is NSNull)
    }

    @Test("wait --node returns once a starting node answers, and says so when none does in time")
    func waitForNode() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let none = try await weft(["wait", "--node", "--home", alice.home, "--timeout", "0.3"])
        #expect(none.status == 1)
        #expect(none.stderr == "weft: No node answered on \(alice.home) within 0.3 seconds.\n")
        // Started and waited for at once: the wait races the start and wins only once it answers.
        let node = try ChildProcess(["node", "--home", alice.home, "--listen", "127.0.0.1:0"])
        defer { node.terminate() }
        let ready = try await weft(["wait", "--node", "--home", alice.home, "--timeout", "30"])
        #expect(ready.status == 0, "\(ready.stderr)")
        #expect(ready.stdout == "ready\n")
        #expect(try await weft(["status", "--home", alice.home]).status == 0)
        let both = try await weft(["wait", "--node", String(repeating: "ab", count: 16), "--home", alice.home])
        #expect(both.status == 64)
    }
}
