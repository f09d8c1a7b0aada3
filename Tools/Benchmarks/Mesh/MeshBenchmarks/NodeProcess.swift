import Foundation
import WeftControl
import WeftCrypto
import WeftNode

/// The `weft` binary the benchmarks run: `--weft PATH`, else `weft` next to this executable
/// (both are built into the same `.build/release` by `Tools/bench-mesh`).
nonisolated(unsafe) var weftBinary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("weft")

/// A home made by `weft init --no-passphrase` and, once started, its `weft node` process.
final class NodeProcess {
    let name: String
    let home: NodeHome
    private(set) var process: Process?
    /// `host:port` from the address file, once listening.
    private(set) var address = ""
    /// From spawning the process to its address file appearing (it is written once the node
    /// listens and just before the control socket serves).
    private(set) var startToListening: Duration = .zero

    /// Runs `weft init` for a home under `directory`; a new mesh unless `meshKeyFrom` is given.
    init(_ name: String, in directory: URL, meshKeyFrom other: NodeProcess? = nil) throws {
        self.name = name
        home = NodeHome(directory: directory.appendingPathComponent(name))
        var arguments = ["init", "--home", home.directory.path, "--name", name, "--no-passphrase"]
        arguments += other.map { ["--mesh-key-file", $0.home.meshKeyFile.path] } ?? ["--new-mesh"]
        let status = try Self.run(arguments)
        guard status == 0 else { throw BenchmarkError("weft init for \(name) exited with \(status)") }
    }

    var user: PublicIdentity { get throws { try home.publicIdentity() } }
    var socketPath: String { home.controlSocket.path }
    var pid: Int32 { process?.processIdentifier ?? 0 }

    /// Starts `weft node` dialing `peers`, and waits (polling every millisecond) until its address
    /// file appears.
    func start(peers: [NodeProcess] = []) throws {
        let process = Process()
        process.executableURL = weftBinary
        var arguments = ["node", "--home", home.directory.path, "--listen", "127.0.0.1:0", "--discovery", "off", "--log-level", "warning"]
        for peer in peers { arguments += ["--peer", peer.address] }
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let log = home.directory.appendingPathComponent("node.log")
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw BenchmarkError("cannot create \(log.path) for \(name)'s log")
        }
        process.standardError = try FileHandle(forWritingTo: log)
        let spawned = ContinuousClock.now
        try process.run()
        self.process = process
        let deadline = spawned + .seconds(30)
        while !FileManager.default.fileExists(atPath: home.addressFile.path) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                throw BenchmarkError("\(name) did not start listening; see \(log.path)")
            }
            usleep(1000)
        }
        startToListening = ContinuousClock.now - spawned
        address = try String(contentsOf: home.addressFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Resident memory from /proc/PID/status (VmRSS), in MB (10^6 bytes).
    func residentMegabytes() throws -> Double {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { throw BenchmarkError("no VmRSS for \(name)") }
        return kilobytes * 1024 / 1_000_000
    }

    /// SIGTERM, then SIGKILL if it has not exited within 10 s.
    func stop() {
        guard let process, process.isRunning else { return }
        process.terminate()
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning, ContinuousClock.now < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }

    /// Runs `weft ARGUMENTS` to completion, its output discarded; returns the exit status.
    static func run(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = weftBinary
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    // MARK: - Control requests

    func request(_ request: ControlRequest) async throws -> ControlResponse {
        try await ControlClient.withConnection(socketPath: socketPath) { try await $0.request(request) }
    }

    func status() async throws -> NodeStatus {
        guard case .status(let status) = try await request(.status) else { throw BenchmarkError("STATUS answered otherwise") }
        return status
    }

    var heldOperations: UInt64 { get async throws { try await status().heldOperations ?? 0 } }
}

/// A fresh directory under /tmp, removed when released.
final class TemporaryDirectory {
    let url: URL
    init(_ label: String) throws {
        url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("weft-mesh-bench-\(label)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every `interval` until it holds; throws after `seconds`.
func waitUntil(
    _ what: String, seconds: Double, interval: Duration = .milliseconds(20), _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw BenchmarkError("timed out after \(seconds) s waiting for \(what)") }
        try await Task.sleep(for: interval)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
