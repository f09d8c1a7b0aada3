import Foundation
import Testing
import WeftCrypto

@Suite("weft node, as real processes", .timeLimit(.minutes(2)))
struct NodeProcessTests {
    /// Creates a passphrase-protected home and returns its user id.
    private func makeHome(_ dir: TemporaryDirectory, _ name: String, meshKeyFrom: String? = nil) async throws -> String {
        let pass = try dir.write("\(name).pass", "passphrase of \(name)\n")
        var arguments = ["init", "--home", dir.path(name), "--name", name, "--passphrase-file", pass]
        arguments += meshKeyFrom.map { ["--mesh-key-file", dir.path("\($0)/mesh.key")] } ?? ["--new-mesh"]
        let child = try ChildProcess(arguments)
        #expect(try await child.wait() == 0, "\(child.stderr)")
        return try await weft("id", "--home", dir.path(name)).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("two nodes started by hand authenticate each other, ping, and stop cleanly on SIGTERM")
    func twoNodes() async throws {
        let dir = try TemporaryDirectory()
        let aliceID = try await makeHome(dir, "alice")
        let bobID = try await makeHome(dir, "bob", meshKeyFrom: "alice")

        let alice = try ChildProcess([
            "node", "--home", dir.path("alice"), "--passphrase-file", dir.path("alice.pass"),
            "--listen", "127.0.0.1:0", "--discovery", "off", "--ping-interval", "1", "--idle-timeout", "3", "--log-level", "debug",
        ])
        defer { alice.terminate() }
        let listening = try await alice.waitFor("listening on ")
        let address = try #require(listening.split(separator: "\n").first { $0.hasPrefix("listening on ") })
            .dropFirst("listening on ".count)
        #expect(address.hasPrefix("127.0.0.1:"))
        // The node serves the home's store.
        #expect(FileManager.default.fileExists(atPath: dir.path("alice/weft.sqlite")))

        let bob = try ChildProcess(
            [
                "node", "--home", dir.path("bob"), "--listen", "127.0.0.1:0", "--discovery", "off", "--peer", String(address),
                "--ping-interval", "1", "--idle-timeout", "3", "--log-level", "debug",
            ],
            environment: ["WEFT_PASSPHRASE": "passphrase of bob"])
        defer { bob.terminate() }

        try await alice.waitFor("peer authenticated: \(bobID) (bob)", inStderr: true)
        try await bob.waitFor("peer authenticated: \(aliceID) (alice)", inStderr: true)
        // Keepalive: a side pings when it sent nothing for 1 s, so the quiet connection outlives
        // the 3 s idle timeout. (Whichever side pings first keeps the other busy answering, so
        // only one of them may see pongs.)
        try await Task.sleep(for: .seconds(5))
        #expect(alice.stderr.contains("pong after") || bob.stderr.contains("pong after"))
        #expect(!alice.stderr.contains("connection closed"), "\(alice.stderr)")
        #expect(!bob.stderr.contains("connection closed"), "\(bob.stderr)")

        bob.terminate()
        #expect(try await bob.wait() == 0, "\(bob.stderr)")
        try await alice.waitFor("the peer closed the connection (shutting down", inStderr: true)
        #expect(alice.isRunning)
        alice.terminate()
        #expect(try await alice.wait() == 0, "\(alice.stderr)")
    }

    @Test("a wrong passphrase: one sentence, non-zero exit, identity file untouched")
    func wrongPassphrase() async throws {
        let dir = try TemporaryDirectory()
        _ = try await makeHome(dir, "alice")
        let identityPath = dir.path("alice/identity.key")
        let before = try Data(contentsOf: URL(fileURLWithPath: identityPath))
        let modified = try FileManager.default.attributesOfItem(atPath: identityPath)[.modificationDate] as? Date

        let wrong = try dir.write("wrong.pass", "not the passphrase\n")
        let result = try await weft("node", "--home", dir.path("alice"), "--passphrase-file", wrong, "--discovery", "off")
        #expect(result.status != 0)
        #expect(lines(result.stderr) == ["weft: The passphrase does not open the identity in \(identityPath)."])
        #expect(!result.stdout.contains("listening"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: identityPath)) == before)
        #expect(try FileManager.default.attributesOfItem(atPath: identityPath)[.modificationDate] as? Date == modified)
    }

    @Test("no passphrase source and no terminal: one sentence saying how to give one")
    func missingPassphrase() async throws {
        let dir = try TemporaryDirectory()
        _ = try await makeHome(dir, "alice")
        let result = try await weft("node", "--home", dir.path("alice"), "--discovery", "off")
        #expect(result.status != 0)
        #expect(lines(result.stderr).count == 1)
        #expect(result.stderr.contains("--passphrase-file"))
    }

    @Test("a truncated or altered identity file is reported as damaged, not a crash", arguments: ["truncate", "alter"])
    func damagedIdentity(how: String) async throws {
        let dir = try TemporaryDirectory()
        _ = try await makeHome(dir, "alice")
        let identityPath = dir.path("alice/identity.key")
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: identityPath)))
        if how == "truncate" { bytes.removeLast(20) } else { bytes[60] ^= 0x40 }
        try Data(bytes).write(to: URL(fileURLWithPath: identityPath))

        for arguments in [
            ["node", "--home", dir.path("alice"), "--passphrase-file", dir.path("alice.pass"), "--discovery", "off"],
            ["id", "--home", dir.path("alice")],
        ] {
            let child = try ChildProcess(arguments)
            let status = try await child.wait()
            #expect(status == 1, "\(arguments[0]): \(child.stderr)")
            #expect(lines(child.stderr).count == 1, "\(child.stderr)")
            #expect(child.stderr.contains("is damaged"), "\(child.stderr)")
        }
    }
}
