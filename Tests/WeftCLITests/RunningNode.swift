import Foundation
import Testing

/// A home created with `weft init --no-passphrase` and, once started, its `weft node` process.
final class RunningNode: @unchecked Sendable {
    // @unchecked: `process` is set once in `start()` before any other task sees the node.
    let home: String
    let name: String
    private(set) var process: ChildProcess?
    private(set) var address = ""

    /// Creates the home (a new mesh unless `meshKeyFrom` names another home).
    init(_ directory: TemporaryDirectory, _ name: String, meshKeyFrom other: RunningNode? = nil) async throws {
        home = directory.path(name)
        self.name = name
        var arguments = ["init", "--home", home, "--name", name, "--no-passphrase"]
        arguments += other.map { ["--mesh-key-file", "\($0.home)/mesh.key"] } ?? ["--new-mesh"]
        let result = try await weft(arguments)
        #expect(result.status == 0, "\(result.stderr)")
    }

    /// Starts `weft node` and waits until it prints its address (in `namespace`, if given,
    /// listening on `listen` there; its home and control socket stay on the shared file system).
    /// Discovery stays off unless asked for: only a namespace's node may multicast.
    func start(
        _ extra: [String] = [], listen: String = "127.0.0.1:0", namespace: String? = nil, discovery: Bool = false,
        environment: [String: String] = [:]
    ) async throws {
        let arguments = ["node", "--home", home, "--listen", listen, "--discovery", discovery ? "on" : "off", "--log-level", "info"]
        let child = try ChildProcess(arguments + extra, environment: environment, namespace: namespace)
        process = child
        let output = try await child.waitFor("listening on ")
        address = String(try #require(lines(output).first { $0.hasPrefix("listening on ") }).dropFirst("listening on ".count))
    }

    /// `weft COMMAND --home HOME ARGUMENTS...`
    func run(_ command: [String], _ arguments: [String] = []) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await weft(command + ["--home", home] + arguments)
    }

    /// Runs a command that must succeed; returns its standard output, trimmed.
    func ok(_ command: String..., arguments: [String] = []) async throws -> String {
        let words = command.flatMap { $0.split(separator: " ").map(String.init) }
        let result = try await run(words, arguments)
        #expect(result.status == 0, "weft \(words) \(arguments): \(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs a command with --json and parses its output.
    func json(_ command: String..., arguments: [String] = []) async throws -> Any {
        let words = command.flatMap { $0.split(separator: " ").map(String.init) }
        let result = try await run(words, arguments + ["--json"])
        #expect(result.status == 0, "weft \(words) \(arguments): \(result.stderr)")
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8), options: [.fragmentsAllowed])
    }

    /// Runs a command that must be refused with one sentence; returns it (without `weft: `).
    func refused(_ words: [String]) async throws -> String {
        let result = try await run(words)
        #expect(result.status != 0, "weft \(words) was accepted: \(result.stdout)")
        #expect(lines(result.stderr).count == 1, "weft \(words): \(result.stderr)")
        #expect(result.stderr.hasPrefix("weft: "), "\(result.stderr)")
        return String(result.stderr.dropFirst("weft: ".count)).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// alice's node running, bob's home made on her mesh (not started), and a conversation of
    /// the two on alice's node: what most CLI tests start from. The caller stops alice.
    static func aliceWithConversation(in dir: TemporaryDirectory) async throws -> (alice: RunningNode, bob: RunningNode, conversation: String) {
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start()
        let conversation = try await alice.ok("conv new", arguments: [try await bob.userID()])
        return (alice, bob, conversation)
    }

    func userID() async throws -> String { try await weft(["id", "--home", home]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) }

    /// SIGTERM, then the exit status.
    func stop() async throws -> Int32 {
        guard let process else { return 0 }
        process.terminate()
        return try await process.wait()
    }

    deinit { process?.kill() }
}

/// Runs weft with an argument array.
func weft(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
    let child = try ChildProcess(arguments)
    let status = try await child.wait()
    return (status, child.stdout, child.stderr)
}

/// Polls `condition` until it holds or `seconds` pass.
func eventually(_ what: String, seconds: Double = 20, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("\(what) did not happen within \(seconds) s")
    throw CancellationError()
}

func isSocket(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
}

func fileMode(_ path: String) -> mode_t {
    var info = stat()
    return lstat(path, &info) == 0 ? info.st_mode & 0o777 : 0
}
