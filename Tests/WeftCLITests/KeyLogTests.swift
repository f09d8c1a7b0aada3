import Foundation
import Testing

@Suite("weft node with WEFT_KEYLOG: a key log of every connection (SPEC.md §18)", .serialized, .timeLimit(.minutes(3)))
struct KeyLogTests {
    /// The key log's lines, once it holds `connections` transport lines (polled until then).
    static func keyLogLines(_ path: String, connections: Int) async throws -> [Substring] {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            let found = lines(text)
            if found.filter({ $0.hasPrefix("WEFT_TRANSPORT ") }).count >= connections { return found }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("the key log \(path) did not come to name \(connections) connection(s)")
        throw CancellationError()
    }

    @Test("a node started with WEFT_KEYLOG warns on every start and appends each connection's secrets, in the documented lines, to a file only its owner reads; its peer, started without, says nothing of it")
    func keyLogPerConnection() async throws {
        let dir = try TemporaryDirectory()
        let keyLog = dir.path("keys.log")
        let bob = try await RunningNode(dir, "bob")
        let alice = try await RunningNode(dir, "alice", meshKeyFrom: bob)
        try await bob.start()
        defer { _ = bob.process?.terminate() }
        try await alice.start(["--peer", bob.address], environment: ["WEFT_KEYLOG": keyLog])

        let warning = "WEFT_KEYLOG is set: writing the secrets of every connection to \(keyLog)"
        try await #require(alice.process).waitFor(warning, inStderr: true)
        let first = try await Self.keyLogLines(keyLog, connections: 1)
        #expect(first.count == 6, "five handshake fields and the transport keys: \(first)")
        let hex = { (text: Substring, count: Int) in text.count == count * 2 && text.allSatisfy { "0123456789abcdef".contains($0) } }
        for (index, line) in first.prefix(5).enumerated() {
            let words = line.split(separator: " ")
            #expect(words.count == 6 && words[0] == "WEFT_HANDSHAKE_FIELD" && hex(words[1], 32) && words[2] == "\(index)", "\(line)")
            #expect(words.count == 6 && hex(words[3], 32) && UInt64(words[4]) != nil && hex(words[5], 64), "\(line)")
        }
        let transport = first[5].split(separator: " ")
        #expect(transport.count == 4 && transport[0] == "WEFT_TRANSPORT" && transport[1] == first[0].split(separator: " ")[1])
        #expect(transport.count == 4 && hex(transport[2], 32) && hex(transport[3], 32) && transport[2] != transport[3])
        #expect(fileMode(keyLog) == 0o600)
        #expect(!(bob.process?.stderr.contains("WEFT_KEYLOG") ?? true), "bob was not asked for a key log")

        // Started again: the warning again, and the next connection's lines appended.
        #expect(try await alice.stop() == 0)
        try await alice.start(["--peer", bob.address], environment: ["WEFT_KEYLOG": keyLog])
        defer { _ = alice.process?.terminate() }
        try await #require(alice.process).waitFor(warning, inStderr: true)
        let second = try await Self.keyLogLines(keyLog, connections: 2)
        #expect(second.count == 12 && Array(second.prefix(6)) == first)
        #expect(second[6].split(separator: " ")[1] != first[0].split(separator: " ")[1], "a new connection, a new ephemeral key")
    }

    @Test("a key log that cannot be opened stops the node with one sentence")
    func unopenableKeyLog() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let result = try await weft(
            "node", "--home", alice.home, "--listen", "127.0.0.1:0", "--discovery", "off",
            environment: ["WEFT_KEYLOG": dir.path("no-such-directory/keys.log")])
        #expect(result.status != 0)
        #expect(lines(result.stderr).count == 1 && result.stderr.contains("Cannot open the key log"), "\(result.stderr)")
    }
}
