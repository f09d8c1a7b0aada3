import Foundation
import WeftNode

/// One `weft node` process, its output going to a log file.
final class NodeProcess: @unchecked Sendable {
    // @unchecked: `process` is configured and started in `init` before anyone else sees it;
    // afterwards it is only read (isRunning, terminationStatus, processIdentifier), which
    // Foundation's Process allows from any thread.
    private let process: Process

    init(binary: URL, arguments: [String], log: URL) throws {
        if !FileManager.default.fileExists(atPath: log.path), !FileManager.default.createFile(atPath: log.path, contents: nil) {
            throw LocalMeshError("Cannot create the node's log file \(log.path).")
        }
        let output = try FileHandle(forWritingTo: log)
        try output.seekToEnd()
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["WEFT_PASSPHRASE"] = nil
        environment["WEFT_HOME"] = nil
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        do {
            try ProcessLaunch.run(process)
        } catch {
            throw LocalMeshError("Cannot run \(binary.path): \(error).")
        }
        try? output.close()  // the child holds its own copy
        self.process = process
    }

    var isRunning: Bool { process.isRunning }
    var identifier: Int32 { process.processIdentifier }

    /// How the process ended, once it has.
    var exit: Exit? {
        guard !process.isRunning else { return nil }
        return process.terminationReason == .uncaughtSignal ? .signal(process.terminationStatus) : .status(process.terminationStatus)
    }

    enum Exit: Equatable, CustomStringConvertible {
        case status(Int32)
        case signal(Int32)

        var description: String {
            switch self {
            case .status(let status): "exited with status \(status)"
            case .signal(let signal): "ended by signal \(signal)"
            }
        }
    }

    func signal(_ signal: Int32) {
        if process.isRunning { _ = kill(process.processIdentifier, signal) }
    }

    /// Polls until the process has ended; nil if it still runs at the deadline.
    func waitForExit(timeout: Duration) async -> Exit? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let exit { return exit }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return exit
    }
}

/// Runs `weft` to completion (a short command such as `init`); throws with its output if it
/// fails or outlasts `timeout`.
func runWeft(_ binary: URL, _ arguments: [String], log: URL, timeout: Duration) async throws {
    let child = try NodeProcess(binary: binary, arguments: arguments, log: log)
    guard let exit = await child.waitForExit(timeout: timeout) else {
        child.signal(SIGKILL)
        throw LocalMeshError("weft \(arguments.joined(separator: " ")) did not finish within \(timeout).\(logTail(log))")
    }
    guard exit == .status(0) else {
        throw LocalMeshError("weft \(arguments.joined(separator: " ")) \(exit).\(logTail(log))")
    }
}

/// The last lines of a log, to append to an error.
func logTail(_ log: URL, lines: Int = 15) -> String {
    guard let text = try? String(contentsOf: log, encoding: .utf8), !text.isEmpty else { return "" }
    return "\n--- last lines of \(log.path):\n" + text.split(separator: "\n").suffix(lines).joined(separator: "\n")
}
