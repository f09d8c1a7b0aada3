import Foundation
import Testing
import WeftCrypto

@Suite("weft init and id, as real processes", .timeLimit(.minutes(2)))
struct IdentityCommandTests {
    @Test("init seals an identity with a passphrase; files are 0600; id needs no passphrase")
    func initAndId() async throws {
        let dir = try TemporaryDirectory()
        let pass = try dir.write("pass", "open sesame\n")
        let home = dir.path("alice")
        let created = try await weft("init", "--home", home, "--name", "alice", "--new-mesh", "--passphrase-file", pass)
        #expect(created.status == 0, "\(created.stderr)")
        for file in ["identity.key", "mesh.key", "display-name"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: home + "/" + file)
            #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(file)")
        }
        let printed = try await weft("id", "--home", home)
        #expect(printed.status == 0)
        let id = String(printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(created.stdout.contains("user id: \(id)"))
        _ = try UserIdentifier.decode(id)

        // The identity really is sealed with that passphrase.
        let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: home + "/identity.key")))
        #expect(try SealedIdentity.isProtected(file))
        let opened = try SealedIdentity.open(file, passphrase: SecureBytes(copying: Array("open sesame".utf8)))
        #expect(opened.publicKey.description == id)
    }

    @Test("WEFT_HOME and WEFT_PASSPHRASE are honoured")
    func environment() async throws {
        let dir = try TemporaryDirectory()
        let env = ["WEFT_HOME": dir.path("home"), "WEFT_PASSPHRASE": "from the environment"]
        let created = try await weft("init", "--name", "env", "--new-mesh", environment: env)
        #expect(created.status == 0, "\(created.stderr)")
        let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.path("home/identity.key"))))
        _ = try SealedIdentity.open(file, passphrase: SecureBytes(copying: Array("from the environment".utf8)))
        let printed = try await weft("id", environment: ["WEFT_HOME": dir.path("home")])
        #expect(created.stdout.contains(printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    @Test("~ is $HOME: with no --home and no WEFT_HOME the home is $HOME/.weft")
    func homeFromHOME() async throws {
        let dir = try TemporaryDirectory()
        let created = try await weft(
            "init", "--name", "h", "--new-mesh", "--no-passphrase", environment: ["HOME": dir.path("user")])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.path("user/.weft/identity.key")))
    }

    /// How a passphrase file becomes passphrase bytes (SPEC.md §10): one LF, then one CR
    /// before it, are the file's line ending; everything else is the passphrase.
    static let passphraseFiles: [(file: [UInt8], passphrase: String)] = [
        (Array("plain".utf8), "plain"),
        (Array("line\n".utf8), "line"),
        (Array("windows\r\n".utf8), "windows"),
        (Array("two lines\n\n".utf8), "two lines\n"),
        (Array("  spaces kept \n".utf8), "  spaces kept "),
        (Array("cr only\r".utf8), "cr only"),
        (Array("naïve ☃\n".utf8), "naïve ☃"),
    ]

    @Test("a passphrase file's bytes, less one line ending, are the passphrase", arguments: 0..<passphraseFiles.count)
    func passphraseFileBytes(index: Int) async throws {
        let dir = try TemporaryDirectory()
        let (contents, passphrase) = Self.passphraseFiles[index]
        let pass = dir.path("pass")
        try Data(contents).write(to: URL(fileURLWithPath: pass))
        let created = try await weft("init", "--home", dir.path("h"), "--name", "p", "--new-mesh", "--passphrase-file", pass)
        #expect(created.status == 0, "\(created.stderr)")
        let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.path("h/identity.key"))))
        _ = try SealedIdentity.open(file, passphrase: SecureBytes(copying: Array(passphrase.utf8)))
    }

    @Test("an empty or over-long passphrase file is refused with one sentence", arguments: ["\n", String(repeating: "x", count: 1025)])
    func badPassphraseFile(contents: String) async throws {
        let dir = try TemporaryDirectory()
        let pass = try dir.write("pass", contents)
        let created = try await weft("init", "--home", dir.path("h"), "--name", "p", "--new-mesh", "--passphrase-file", pass)
        #expect(created.status != 0)
        #expect(lines(created.stderr).count == 1, "\(created.stderr)")
        #expect(created.stderr.contains("empty") || created.stderr.contains("more than 1024 bytes"), "\(created.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("h/identity.key")))
    }

    @Test("--no-passphrase says clearly that the key is unprotected")
    func unprotected() async throws {
        let dir = try TemporaryDirectory()
        let created = try await weft("init", "--home", dir.path("n"), "--name", "n", "--new-mesh", "--no-passphrase")
        #expect(created.status == 0)
        #expect(created.stderr.contains("UNPROTECTED"))
        let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir.path("n/identity.key"))))
        #expect(try !SealedIdentity.isProtected(file))
    }

    @Test("a second node joins with the first one's mesh key file")
    func joinMesh() async throws {
        let dir = try TemporaryDirectory()
        _ = try await weft("init", "--home", dir.path("a"), "--name", "a", "--new-mesh", "--no-passphrase")
        let joined = try await weft(
            "init", "--home", dir.path("b"), "--name", "b", "--mesh-key-file", dir.path("a/mesh.key"), "--no-passphrase")
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(try String(contentsOfFile: dir.path("a/mesh.key"), encoding: .utf8)
            == String(contentsOfFile: dir.path("b/mesh.key"), encoding: .utf8))
    }

    /// Each bad invocation: a non-zero exit and exactly one sentence on standard error.
    static let badInvocations: [(arguments: [String], mentions: String)] = [
        (["init", "--name", "x"], "--new-mesh"),
        (["init", "--name", "x", "--new-mesh", "--mesh-key-file", "/nonexistent"], "exactly one"),
        (["init", "--new-mesh", "--no-passphrase"], "--name"),
        (["init", "--name", "x", "--new-mesh", "--no-passphrase", "--passphrase-file", "/tmp/p"], "contradict"),
        (["node", "--peer", "not-an-address"], "host:port"),
        (["node", "--listen", "127.0.0.1:99999"], "host:port"),
        (["node", "--ping-interval", "10", "--idle-timeout", "5"], "idle-timeout"),
        (["node", "--discovery", "off", "--discovery-interface", "eth0"], "--discovery-interface needs --discovery on"),
        (["node", "--discovery", "maybe"], "maybe"),
        (["frobnicate"], "frobnicate"),
        (["init", "--name", "x", "--mesh-key-file", "/nonexistent/mesh.key", "--no-passphrase"], "mesh key file"),
    ]

    @Test("a bad argument prints one sentence and exits non-zero", arguments: 0..<badInvocations.count)
    func badArguments(index: Int) async throws {
        let dir = try TemporaryDirectory()
        let (arguments, mentions) = Self.badInvocations[index]
        let result = try ChildProcess(arguments, environment: ["WEFT_HOME": dir.path("home")])
        let status = try await result.wait()
        #expect(status != 0)
        #expect(lines(result.stderr).count == 1, "stderr: \(result.stderr)")
        #expect(result.stderr.hasPrefix("weft: "))
        #expect(result.stderr.contains(mentions), "stderr: \(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("home/identity.key")))
    }

    @Test("weft node refuses discovery it cannot run, in one sentence, before it listens or sends anything")
    func discoveryRefused() async throws {
        let dir = try TemporaryDirectory()
        _ = try await weft("init", "--home", dir.path("a"), "--name", "a", "--new-mesh", "--no-passphrase")
        for (arguments, mentions) in [
            // Asked for: without --discovery, a loopback listener turns discovery off instead
            // (NewcomerInputTests.startingMistakes).
            (["--listen", "127.0.0.1:0", "--discovery", "on"], "127.0.0.1 is loopback: listen on 0.0.0.0 or a LAN address, or pass --discovery off."),
            (["--listen", "[::1]:0", "--discovery", "on"], "::1 is loopback"),
            (["--discovery-interface", "nosuch0"], "There is no interface nosuch0 with an IPv4 address and multicast"),
        ] {
            let node = try ChildProcess(["node", "--home", dir.path("a")] + arguments)
            let status = try await node.wait()
            #expect(status != 0, "\(arguments)")
            let errors = lines(node.stderr).filter { $0.hasPrefix("weft: ") }
            #expect(errors.count == 1 && errors.first?.contains(mentions) == true, "\(arguments): \(node.stderr)")
            #expect(!node.stdout.contains("listening on"), "\(arguments)")
        }
    }

    @Test("init refuses to overwrite an existing identity")
    func noOverwrite() async throws {
        let dir = try TemporaryDirectory()
        _ = try await weft("init", "--home", dir.path("h"), "--name", "a", "--new-mesh", "--no-passphrase")
        let before = try Data(contentsOf: URL(fileURLWithPath: dir.path("h/identity.key")))
        let again = try await weft("init", "--home", dir.path("h"), "--name", "b", "--new-mesh", "--no-passphrase")
        #expect(again.status != 0)
        #expect(lines(again.stderr).count == 1)
        #expect(again.stderr.contains("refusing to overwrite"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir.path("h/identity.key"))) == before)
    }

    @Test("a damaged mesh key file is refused with a clear sentence")
    func damagedMeshKey() async throws {
        let dir = try TemporaryDirectory()
        let bad = try dir.write("mesh.key", "weftmesh1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n")
        let result = try await weft("init", "--home", dir.path("h"), "--name", "x", "--mesh-key-file", bad, "--no-passphrase")
        #expect(result.status != 0)
        #expect(lines(result.stderr).count == 1)
        #expect(result.stderr.contains("damaged"))
    }
}
