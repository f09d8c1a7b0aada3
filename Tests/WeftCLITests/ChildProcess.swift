import Foundation
import WeftNode
import Synchronization
import Testing

/// The `weft` binary built next to this test bundle (or in the package's .build/debug).
let weftBinary: URL = {
    let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("weft")
    if FileManager.default.isExecutableFile(atPath: besideTests.path) { return besideTests }
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    return packageRoot.appendingPathComponent(".build/debug/weft")
}()

/// A real `weft` process (or another program's) with its output collected as it arrives.
final class ChildProcess: @unchecked Sendable {
    // @unchecked: the pipes are only read by their reader threads; the rest is immutable or locked.
    /// Bytes collected from a pipe by a thread of its own that reads until the pipe's end,
    /// decoded as UTF-8 when asked for (a character may arrive split across two reads), and
    /// whether the end was reached: once the child exits and it is, every byte is in.
    private final class Collected: Sendable {
        private let state = Mutex((bytes: [UInt8](), ended: false))

        /// Reads `handle` on a new thread until its end. (Foundation's readability handler is
        /// not called again at the end when the last bytes and the end come together.)
        func read(_ handle: FileHandle) {
            Thread.detachNewThread { [self] in
                var buffer = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let count = buffer.withUnsafeMutableBytes { Glibc.read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    state.withLock { $0.bytes += buffer[..<count] }
                }
                state.withLock { $0.ended = true }
            }
        }

        var value: String { String(decoding: state.withLock { $0.bytes }, as: UTF8.self) }
        var ended: Bool { state.withLock { $0.ended } }
    }

    private let process: SpawnedProcess
    private let stdoutText = Collected()
    private let stderrText = Collected()
    /// The read ends, kept open while the process is watched.
    private let pipes: (out: Pipe, err: Pipe)

    /// Starts `weft ARGUMENTS` (or `executable`) with its output collected.
    /// - Parameter namespace: a network namespace to run it in (`ip netns exec`, which execs
    ///   the program in place: the process is the program's own).
    /// - Parameter executable: the program; weft by default.
    init(_ arguments: [String], environment: [String: String] = [:], namespace: String? = nil, executable: URL = weftBinary) throws {
        var env = ProcessInfo.processInfo.environment
        env["WEFT_PASSPHRASE"] = nil
        env["WEFT_HOME"] = nil
        for (key, value) in environment { env[key] = value }
        let out = Pipe()
        let err = Pipe()
        pipes = (out, err)
        stdoutText.read(out.fileHandleForReading)
        stderrText.read(err.fileHandleForReading)
        defer {
            // The child holds its own copies of the write ends.
            try? out.fileHandleForWriting.close()
            try? err.fileHandleForWriting.close()
        }
        if let namespace {
            process = try SpawnedProcess(
                executable: URL(fileURLWithPath: NamespaceLAN.ip), arguments: ["netns", "exec", namespace, executable.path] + arguments,
                environment: env, output: out.fileHandleForWriting.fileDescriptor, error: err.fileHandleForWriting.fileDescriptor)
        } else {
            process = try SpawnedProcess(
                executable: executable, arguments: arguments, environment: env,
                output: out.fileHandleForWriting.fileDescriptor, error: err.fileHandleForWriting.fileDescriptor)
        }
    }

    var stdout: String { stdoutText.value }
    var stderr: String { stderrText.value }
    var isRunning: Bool { process.isRunning }
    var processIdentifier: Int32 { process.identifier }

    /// Waits for the process to exit and returns its status.
    func wait(seconds: Double = 30) async throws -> Int32 {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.signal(SIGINT)
                Issue.record("\(process.arguments) did not exit within \(seconds) s")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        // Then until both pipes are at their end: what it wrote last has been read.
        while !(stdoutText.ended && stderrText.ended) {
            guard ContinuousClock.now < deadline else {
                Issue.record("\(process.arguments) exited but its output did not end within \(seconds) s")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        // As Foundation reported it: the exit status, or the signal that ended the process.
        switch process.exit {
        case .status(let status)?, .signal(let status)?: return status
        case nil: return -1
        }
    }

    /// Waits until `text` appears in standard output or error; returns that stream's text.
    @discardableResult
    func waitFor(_ text: String, inStderr: Bool = false, seconds: Double = 20) async throws -> String {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            let current = inStderr ? stderr : stdout
            if current.contains(text) { return current }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("\"\(text)\" did not appear; stdout: \(stdout) stderr: \(stderr)")
        throw CancellationError()
    }

    func terminate() { process.signal(SIGTERM) }

    /// SIGKILL: the process gets no chance to clean up, as in a crash or power loss.
    func kill() { process.signal(SIGKILL) }

    /// SIGKILL after `delay`, timed by a dispatch timer: the moment stays precise even while
    /// the test's cooperative threads are busy.
    func kill(after delay: Duration) {
        let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [self] in kill() }
    }
}

/// Runs weft to completion.
func weft(_ arguments: String..., environment: [String: String] = [:]) async throws
    -> (status: Int32, stdout: String, stderr: String)
{
    let child = try ChildProcess(arguments, environment: environment)
    let status = try await child.wait()
    return (status, child.stdout, child.stderr)
}

/// A fresh directory removed at the end of the test.
final class TemporaryDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("weft-cli-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func write(_ name: String, _ contents: String) throws -> String {
        let path = self.path(name)
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

/// The non-empty lines of some output.
func lines(_ text: String) -> [Substring] { text.split(separator: "\n") }
