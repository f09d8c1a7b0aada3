import Foundation
import Synchronization
import WeftControl
import WeftCrypto
import WeftModel
import WeftNode

/// A mesh of real `weft node` processes on loopback, for integration tests.
///
/// Each node gets its own home in a temporary directory (`weft init` with an unprotected
/// identity and the mesh key of node 0), listens on 127.0.0.1 on a free port, and dials its
/// topology neighbours. The mesh drives the nodes through their control sockets (SPEC.md §15):
/// cut and heal links, stop, kill and restart nodes, wait for convergence, and any node's
/// requests through `nodes[i]`.
///
/// ```swift
/// try await LocalMesh.with(nodes: 4, topology: .line) { mesh in
///     let (a, d) = (mesh.nodes[0], mesh.nodes[3])
///     let chat = try await a.createConversation(with: [d.user])
///     try await a.send("hello", in: chat.id)
///     try await mesh.waitUntilConverged(timeout: .seconds(30))
/// }
/// ```
///
/// Every process started is stopped by `shutdown()` (which `with` always calls), or killed
/// when the mesh is released.
public final class LocalMesh: Sendable {
    /// How the mesh runs its nodes.
    public struct Options: Sendable {
        /// The `weft` executable; nil finds it (`LocalMesh.weftBinary()`).
        public var binary: URL?
        /// Display names, one per node; nil names them n0, n1, ...
        public var names: [String]?
        /// Arguments added to every `weft node` (`--ttl 60`, say).
        public var nodeArguments: [String]
        /// How long a node may take to start or to stop.
        public var processTimeout: Duration
        /// Leave the homes (and logs) on disk after `shutdown()`.
        public var keepHomes: Bool

        public init(
            binary: URL? = nil, names: [String]? = nil, nodeArguments: [String] = [], processTimeout: Duration = .seconds(30),
            keepHomes: Bool = false
        ) {
            self.binary = binary
            self.names = names
            self.nodeArguments = nodeArguments
            self.processTimeout = processTimeout
            self.keepHomes = keepHomes
        }
    }

    /// The nodes, by index.
    public let nodes: [Node]
    /// The topology's links (cut or not).
    public let links: Set<Link>
    /// The directory holding every home and log.
    public let directory: URL
    public let options: Options
    private let binary: URL
    private let cutLinks = Mutex(Set<Link>())
    private let isShutDown = Mutex(false)

    private init(nodes: [Node], links: Set<Link>, directory: URL, options: Options, binary: URL) {
        self.nodes = nodes
        self.links = links
        self.directory = directory
        self.options = options
        self.binary = binary
    }

    /// Creates `count` homes sharing one mesh key and starts a node on each, in index order,
    /// each dialing its neighbours started before it. Returns once every node answers on its
    /// control socket (links come up shortly after: see `waitUntilLinked`). On failure, every
    /// process started is stopped and the homes removed.
    public static func start(nodes count: Int, topology: Topology, options: Options = Options()) async throws -> LocalMesh {
        precondition(count > 0, "a mesh has at least one node")
        let binary = try options.binary ?? weftBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("weft-localmesh-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var nodes: [Node] = []
        do {
            for index in 0..<count {
                let name = options.names.map { $0[index] } ?? "n\(index)"
                let home = directory.appendingPathComponent(name)
                let log = directory.appendingPathComponent("\(name).log")
                var arguments = ["init", "--home", home.path, "--name", name, "--no-passphrase"]
                arguments += index == 0 ? ["--new-mesh"] : ["--mesh-key-file", nodes[0].home.appendingPathComponent("mesh.key").path]
                try await runWeft(binary, arguments, log: log, timeout: options.processTimeout)
                let user = try NodeHome(directory: home).publicIdentity()
                nodes.append(Node(index: index, name: name, home: home, user: user, logFile: log))
            }
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        let mesh = LocalMesh(nodes: nodes, links: topology.links(count: count), directory: directory, options: options, binary: binary)
        do {
            for node in nodes {
                let earlier = mesh.neighbours(of: node.index).filter { $0 < node.index }
                try await node.launch(
                    binary: binary, peers: earlier.compactMap { nodes[$0].address.map { "\($0)" } }, extraArguments: options.nodeArguments,
                    timeout: options.processTimeout)
            }
        } catch {
            await mesh.shutdown()
            throw error
        }
        return mesh
    }

    /// Starts a mesh, runs `body` with it, and shuts it down whether `body` returns or throws.
    public static func with<R: Sendable>(
        nodes count: Int, topology: Topology, options: Options = Options(), _ body: (LocalMesh) async throws -> R
    ) async throws -> R {
        let mesh = try await start(nodes: count, topology: topology, options: options)
        do {
            let result = try await body(mesh)
            try await mesh.shutdownChecked()
            return result
        } catch {
            // A failed run keeps its homes (the nodes' logs and stores) and says where, on
            // standard error: the error itself stays the one the body threw.
            await mesh.shutdown(keepingHomes: true)
            let note = "LocalMesh: the run failed; its homes and logs are kept in \(mesh.directory.path)\n"
            _ = note.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
            throw error
        }
    }

    /// The nodes linked to `node` in the topology (cut or not).
    public func neighbours(of node: Int) -> [Int] { links.compactMap { $0.other(than: node) }.sorted() }

    /// The links that are cut now. (Named apart from `cut(_:_:)`, which cuts one.)
    public var cutLinkSet: Set<Link> { cutLinks.withLock { $0 } }

    // MARK: - Links

    /// Cuts the link between nodes `a` and `b` on both sides: each closes the connection and
    /// refuses the other until `heal`. Both nodes must be running.
    public func cut(_ a: Int, _ b: Int) async throws {
        cutLinks.withLock { _ = $0.insert(Link(a, b)) }
        try await nodes[a].cut(nodes[b].user)
        try await nodes[b].cut(nodes[a].user)
    }

    /// Heals a cut link on both sides; the dialing side redials at once.
    public func heal(_ a: Int, _ b: Int) async throws {
        cutLinks.withLock { _ = $0.remove(Link(a, b)) }
        try await nodes[a].heal(nodes[b].user)
        try await nodes[b].heal(nodes[a].user)
    }

    /// Cuts every link between the two groups of nodes (a partition).
    public func partition(_ group: [Int], from other: [Int]) async throws {
        for link in links where (group.contains(link.a) && other.contains(link.b)) || (group.contains(link.b) && other.contains(link.a)) {
            try await cut(link.a, link.b)
        }
    }

    /// Heals every cut link.
    public func healAll() async throws {
        for link in cutLinkSet { try await heal(link.a, link.b) }
    }

    /// Polls until every running node is connected to exactly its running neighbours over
    /// uncut links (and to no one else), or throws after `timeout`.
    public func waitUntilLinked(timeout: Duration = .seconds(30)) async throws {
        var last = ""
        try await poll(timeout: timeout, what: { "the links did not come up: \(last)" }) {
            let cut = self.cutLinkSet
            for node in nodes where node.isRunning {
                let expected = Set(neighbours(of: node.index).filter { nodes[$0].isRunning && !cut.contains(Link(node.index, $0)) }
                    .map { nodes[$0].user })
                let connected = Set(try await node.peers().map(\.user))
                if connected != expected {
                    last = "\(node.name) is connected to \(names(of: connected)), expected \(names(of: expected))"
                    return false
                }
            }
            return true
        }
    }

    // MARK: - Processes

    /// Stops node `index` gracefully (SIGTERM) and checks that it exits with status 0.
    public func stop(_ index: Int) async throws { try await nodes[index].stop(timeout: options.processTimeout) }

    /// Kills node `index` with SIGKILL, as in a crash or power loss.
    public func kill(_ index: Int) async throws { try await nodes[index].kill(timeout: options.processTimeout) }

    /// Starts node `index` again on its home and port, dialing all its topology neighbours;
    /// links cut before are cut again on its side. Returns once it answers on its control
    /// socket.
    public func restart(_ index: Int) async throws {
        let node = nodes[index]
        guard !node.isRunning else { throw LocalMeshError("Node \(node.name) is running; stop or kill it first.") }
        let cut = self.cutLinkSet
        let peers = neighbours(of: index).compactMap { nodes[$0].address.map { "\($0)" } }
        try await node.launch(binary: binary, peers: peers, extraArguments: options.nodeArguments, timeout: options.processTimeout)
        for other in neighbours(of: index) where cut.contains(Link(index, other)) {
            try await node.cut(nodes[other].user)
        }
    }

    /// Stops every running node (SIGTERM, then SIGKILL past the timeout) and removes the homes
    /// unless `options.keepHomes`. Safe to call more than once.
    public func shutdown() async {
        _ = try? await shutdownChecked()
    }

    /// `shutdown()`, keeping the homes whatever `options.keepHomes` says (a failed run).
    func shutdown(keepingHomes: Bool) async {
        _ = try? await shutdownChecked(keepingHomes: keepingHomes)
    }

    /// `shutdown()`, throwing if a node did not exit with status 0 on SIGTERM.
    public func shutdownChecked() async throws { try await shutdownChecked(keepingHomes: false) }

    private func shutdownChecked(keepingHomes: Bool) async throws {
        guard isShutDown.withLock({ done in defer { done = true }; return !done }) else { return }
        var failures: [String] = []
        await withTaskGroup(of: String?.self) { group in
            for node in nodes where node.isRunning {
                group.addTask {
                    do {
                        try await node.stop(timeout: self.options.processTimeout)
                        return nil
                    } catch {
                        return "\(error)"
                    }
                }
            }
            for await failure in group { if let failure { failures.append(failure) } }
        }
        if !options.keepHomes, !keepingHomes { try? FileManager.default.removeItem(at: directory) }
        if !failures.isEmpty { throw LocalMeshError(failures.joined(separator: "\n")) }
    }

    deinit {
        for node in nodes { node.killNow() }
    }

    // MARK: - Helpers

    func names(of users: Set<UserID>) -> String {
        "[" + nodes.filter { users.contains($0.user) }.map(\.name).joined(separator: ", ") + "]"
    }

    /// Polls `condition` every 50 ms until it holds; throws `what()` at the deadline. A
    /// condition that throws counts as not holding yet (a node may be between connections).
    func poll(timeout: Duration, what: () -> String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            if (try? await condition()) == true { return }
            guard ContinuousClock.now < deadline else {
                // The last lines of each node's log: what it was doing when the wait gave up.
                let tails = nodes.map { logTail($0.logFile, lines: 8) }.joined()
                throw LocalMeshError("After \(timeout), \(what())\(tails)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// The `weft` executable: `$WEFT_BINARY` if set, else `weft` beside the running test
    /// bundle (SwiftPM builds it into the same directory), else `.build/debug/weft` in the
    /// current directory or one above it.
    public static func weftBinary() throws -> URL {
        let manager = FileManager.default
        if let path = ProcessInfo.processInfo.environment["WEFT_BINARY"] {
            guard manager.isExecutableFile(atPath: path) else { throw LocalMeshError("WEFT_BINARY=\(path) is not an executable file.") }
            return URL(fileURLWithPath: path)
        }
        var candidates: [URL] = []
        for executable in [Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])].compactMap({ $0 }) {
            // The test runner, or the executable inside a .xctest bundle (macOS: Contents/MacOS).
            var directory = executable.resolvingSymlinksInPath().deletingLastPathComponent()
            for _ in 0..<4 {
                candidates.append(directory.appendingPathComponent("weft"))
                directory = directory.deletingLastPathComponent()
            }
        }
        var directory = URL(fileURLWithPath: manager.currentDirectoryPath)
        for _ in 0..<2 {
            candidates.append(directory.appendingPathComponent(".build/debug/weft"))
            directory = directory.deletingLastPathComponent()
        }
        func isExecutable(_ url: URL) -> Bool {
            var isDirectory: ObjCBool = false
            return manager.fileExists(atPath: url.path, isDirectory: &isDirectory) && !isDirectory.boolValue
                && manager.isExecutableFile(atPath: url.path)
        }
        var tried: [String] = []
        for candidate in candidates where !tried.contains(candidate.standardizedFileURL.path) {
            tried.append(candidate.standardizedFileURL.path)
        }
        guard let found = candidates.first(where: isExecutable) else {
            throw LocalMeshError(
                "Cannot find the weft executable (tried \(tried.joined(separator: ", "))). In a package of your own, add "
                    + "`.product(name: \"weft\", package: \"weft\")` to the test target's dependencies so that `swift test` "
                    + "builds it beside the tests; or set WEFT_BINARY to its path.")
        }
        return found
    }
}
