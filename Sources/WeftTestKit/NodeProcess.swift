import Foundation
import WeftNode

/// One `weft node` process, its output going to a log file.
final class NodeProcess: Sendable {
    private let process: SpawnedProcess

    init(binary: URL, arguments: [String], log: URL) throws {
        if !FileManager.default.fileExists(atPath: log.path), !FileManager.default.createFile(atPath: log.path, contents: nil) {
            throw LocalMeshError("Cannot create the node's log file \(log.path).")
        }
        let output = try FileHandle(forWritingTo: log)
        defer { try? output.close() }  // the child holds its own copy
        try output.seekToEnd()
        var environment = ProcessInfo.processInfo.environment
        environment["WEFT_PASSPHRASE"] = nil
        environment["WEFT_HOME"] = nil
        do {
            process = try SpawnedProcess(
                executable: binary, arguments: arguments, environment: environment,
                output: output.fileDescriptor, error: output.fileDescriptor)
        } catch {
            throw LocalMeshError("\(error)")
        }
    }

    var isRunning: Bool { process.isRunning }
    var identifier: Int32 { process.identifier }

    /// How the process ended, once it has.
    var exit: Exit? { process.exit }

    typealias Exit = SpawnedProcess.Exit

    func signal(_ signal: Int32) { process.signal(signal) }

    /// Polls until the process has ended; nil if it still runs at the deadline.
    func waitForExit(timeout: Duration) async -> Exit? { await process.waitForExit(timeout: timeout) }
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
