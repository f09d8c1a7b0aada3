import ArgumentParser
import Foundation
import WeftControl
import WeftModel
import WeftNode

struct DownloadCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Fetch a message's part (rich content comes in chunks from any peer that holds it) and copy it to a file.",
        discussion: "Shows a progress bar on a terminal (bytes, rate, time left), or JSON progress lines with --json; exits 0 once the part is whole here.")

    @OptionGroup var options: NodeOptions
    @Argument(help: "The message.") var message: String

    @Option(help: "Which part, from 1 (default: the first rich-content part, else 1).")
    var part: Int?

    @Option(help: "Copy the part to this file once it is whole (default: keep it in the node only).")
    var out: String?

    func validate() throws {
        if let part, !(1...Int(UInt16.max)).contains(part) { throw ValidationError("--part must be from 1 to \(UInt16.max).") }
    }

    func execute() async throws {
        let id = try parseMessage(message)
        let path = out.map { URL(fileURLWithPath: $0, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).standardizedFileURL.path } ?? ""
        let bar = ProgressBar(enabled: !options.json && isatty(STDERR_FILENO) == 1)
        try await options.withNode { node in
            try await node.download(id, part: part.map { UInt16($0 - 1) } ?? ControlConstants.defaultPart, to: path) { progress in
                if options.json {
                    try printJSON([
                        "verifiedBytes": progress.verifiedBytes, "totalBytes": progress.totalBytes, "fraction": progress.fraction,
                        "wireBytes": progress.wireBytes, "bytesPerSecond": progress.bytesPerSecond, "status": "\(progress.status)",
                        "reason": nonEmpty(progress.reason),
                    ])
                } else {
                    bar.show(progress)
                }
            }
        }
        bar.finish()
        if !options.json { say(path.isEmpty ? "the part of \(id.hex) is whole on the node" : path) }
    }
}

/// A one-line progress bar on standard error, redrawn in place: bytes, rate, time left.
// @unchecked Sendable: the download's progress callback, its only user besides `finish`, is
// called one value at a time and in order, and `finish` runs after the last; `drawn` is never
// touched by two threads at once.
final class ProgressBar: @unchecked Sendable {
    private let enabled: Bool
    private let output: Int32
    private var drawn = false

    init(enabled: Bool, output: Int32 = STDERR_FILENO) {
        self.enabled = enabled
        self.output = output
    }

    func show(_ progress: DownloadProgress) {
        guard enabled else { return }
        drawn = true
        _ = StandardOutput.write(Self.line(progress), to: output)
    }

    func finish() {
        if drawn { _ = StandardOutput.write("\n", to: output) }
        drawn = false
    }

    /// `[#########---------]  45%  12.3 MiB / 27.0 MiB  5.2 MiB/s  3 s left`
    static func line(_ progress: DownloadProgress, width: Int = 24) -> String {
        let filled = Int((progress.fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let percent = Int((progress.fraction * 100).rounded(.down))
        var line = "\r[\(bar)] \(String(format: "%3d", percent))%  \(bytes(progress.verifiedBytes)) / \(bytes(progress.totalBytes))"
        if progress.bytesPerSecond > 0 {
            line += "  \(bytes(progress.bytesPerSecond))/s"
            let left = Double(progress.totalBytes - progress.verifiedBytes) / Double(progress.bytesPerSecond)
            if progress.verifiedBytes < progress.totalBytes { line += "  \(Int(left.rounded(.up))) s left" }
        }
        if progress.status == .paused { line += "  paused\(progress.reason.isEmpty ? "" : ": \(progress.reason)")" }
        return line + "   "
    }

    static func bytes(_ count: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }
}
