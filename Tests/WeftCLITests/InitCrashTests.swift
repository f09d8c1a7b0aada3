import Foundation
import Testing
import WeftCrypto

/// `weft init` killed at random moments (SIGKILL, as a crash): every home it leaves is either
/// complete, or refused by every command with a sentence saying to run `weft init`, which then
/// completes it. Never a home that `init` refuses and `node` cannot open.
@Suite("weft init killed mid-way", .timeLimit(.minutes(4)))
struct InitCrashTests {
    static let passphrase = "kill me softly"

    enum Outcome: Hashable { case complete, notInitialized }

    /// What a killed `init` left in `home`, checked the way a user would meet it.
    static func inspect(_ home: String, name: String) async throws -> Outcome {
        let identityPath = home + "/identity.key"
        guard FileManager.default.fileExists(atPath: identityPath) else {
            let id = try await weft("id", "--home", home)
            #expect(id.status != 0)
            #expect(lines(id.stderr).count == 1, "\(id.stderr)")
            #expect(id.stderr.contains("holds no Weft identity") && id.stderr.contains("weft init"), "\(id.stderr)")
            return .notInitialized
        }
        try expectComplete(home, name: name)
        let id = try await weft("id", "--home", home)
        #expect(id.status == 0, "\(id.stderr)")
        return .complete
    }

    /// Every file of the home is whole: the identity opens with the passphrase and matches
    /// `weft id`'s key, the mesh key parses, the name is there.
    static func expectComplete(_ home: String, name: String) throws {
        let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: home + "/identity.key")))
        _ = try SealedIdentity.open(file, passphrase: SecureBytes(copying: Array(passphrase.utf8)))
        _ = try MeshKey(fileContents: String(contentsOfFile: home + "/mesh.key", encoding: .utf8))
        #expect(try String(contentsOfFile: home + "/display-name", encoding: .utf8) == name + "\n")
        for file in ["identity.key", "mesh.key", "display-name"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: home + "/" + file)
            #expect((attributes[.posixPermissions] as? Int) == 0o600, "\(file)")
        }
    }

    @Test("killed at random moments, init leaves a complete home or one that init completes")
    func killedAtRandomMoments() async throws {
        let dir = try TemporaryDirectory()
        let pass = try dir.write("pass", Self.passphrase + "\n")
        func initArguments(_ home: String) -> [String] {
            ["init", "--home", home, "--name", "crash", "--new-mesh", "--passphrase-file", pass]
        }

        // How long a whole init takes here (Argon2id dominates): kills are spread over it.
        let started = ContinuousClock.now
        let whole = try ChildProcess(initArguments(dir.path("timing")))
        #expect(try await whole.wait() == 0, "\(whole.stderr)")
        let duration = ContinuousClock.now - started

        // Each kill lands at a random moment below a bound that follows the boundary between
        // the two outcomes (down after a complete home, up after an interrupted one): the
        // kills gather around the end of init, where the files are written, whatever the load.
        var bound = duration
        var outcomes: [Outcome: Int] = [:]
        for attempt in 0..<30 {
            let home = dir.path("home-\(attempt)")
            let delay = bound * Double.random(in: 0...1)
            let child = try ChildProcess(initArguments(home))
            child.kill(after: delay)
            _ = try await child.wait()
            let outcome = try await Self.inspect(home, name: "crash")
            outcomes[outcome, default: 0] += 1
            bound = outcome == .complete ? bound * 0.8 : min(bound * 1.3, duration * 3)
            if outcome == .notInitialized {
                // The way out the sentence gives works.
                let again = try ChildProcess(initArguments(home))
                #expect(try await again.wait() == 0, "killed after \(delay): \(again.stderr)")
                try Self.expectComplete(home, name: "crash")
            }
        }
        // Both kinds of leftover were reached, or the test did not test the crash.
        #expect(outcomes[.complete, default: 0] > 0, "\(outcomes) (a whole init took \(duration))")
        #expect(outcomes[.notInitialized, default: 0] > 0, "\(outcomes) (a whole init took \(duration))")
        print("weft init killed 30 times over \(duration): \(outcomes)")
    }

    @Test("a stale temporary file or a partial home from an earlier crash does not stop init")
    func staleLeftovers() async throws {
        let dir = try TemporaryDirectory()
        let home = dir.path("h")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        _ = try dir.write("h/mesh.key.tmp", "half a key")
        _ = try dir.write("h/identity.key.tmp", "half an identity")
        _ = try dir.write("h/display-name", "old name\n")
        #expect(try await Self.inspect(home, name: "crash") == .notInitialized)
        let pass = try dir.write("pass", Self.passphrase + "\n")
        let created = try await weft("init", "--home", home, "--name", "crash", "--new-mesh", "--passphrase-file", pass)
        #expect(created.status == 0, "\(created.stderr)")
        try Self.expectComplete(home, name: "crash")
    }

    @Test("a symbolic link planted at a temporary file's name is not followed")
    func plantedLink() async throws {
        let dir = try TemporaryDirectory()
        let home = dir.path("h")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let victim = try dir.write("victim", "do not touch\n")
        try FileManager.default.createSymbolicLink(atPath: home + "/mesh.key.tmp", withDestinationPath: victim)
        let created = try await weft("init", "--home", home, "--name", "n", "--new-mesh", "--no-passphrase")
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "do not touch\n")
        _ = try MeshKey(fileContents: String(contentsOfFile: home + "/mesh.key", encoding: .utf8))
    }
}
