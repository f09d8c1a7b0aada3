import Foundation
import Synchronization
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

#if canImport(Glibc)
import Glibc
#endif

/// The `weft-store-writer` helper built next to this test bundle.
let storeWriterBinary: URL = {
    let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        .appendingPathComponent("weft-store-writer")
    if FileManager.default.isExecutableFile(atPath: besideTests.path) { return besideTests }
    let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    return packageRoot.appendingPathComponent(".build/debug/weft-store-writer")
}()

/// A running writer whose standard output is collected as it arrives.
final class WriterProcess: @unchecked Sendable {
    /// Text collected from the pipe by its readability handler.
    private final class Collected: Sendable {
        let text = Mutex("")
        /// When each complete line arrived.
        let arrivals = Mutex<[ContinuousClock.Instant]>([])
        func append(_ data: Data) {
            let now = ContinuousClock.now
            let lines = data.count(where: { $0 == UInt8(ascii: "\n") })
            text.withLock { $0 += String(decoding: data, as: UTF8.self) }
            arrivals.withLock { $0 += Array(repeating: now, count: lines) }
        }
        var value: String { text.withLock { $0 } }
    }

    // @unchecked: `process` is started in init and then only read (isRunning, status), which
    // Foundation's Process allows from any thread; the output is behind a Mutex.
    let process: Process
    private let output = Collected()

    convenience init(directory: URL, batchSize: Int, partBytes: Int) throws {
        try self.init(arguments: [directory.path, "--batch-size", "\(batchSize)", "--part-bytes", "\(partBytes)"])
    }

    /// Runs the writer with `arguments`.
    init(arguments: [String]) throws {
        let process = Process()
        process.executableURL = storeWriterBinary
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardError = FileHandle.standardError
        let pipe = Pipe()
        process.standardOutput = pipe
        self.process = process
        pipe.fileHandleForReading.readabilityHandler = { [output] handle in output.append(handle.availableData) }
        try process.run()
    }

    var lines: [Substring] { output.value.split(separator: "\n") }

    /// The N of every "committed N" line so far.
    var committed: [Int] { lines.compactMap { $0.hasPrefix("committed ") ? Int($0.dropFirst(10)) : nil } }
    var writing: [Int] { lines.compactMap { $0.hasPrefix("writing ") ? Int($0.dropFirst(8)) : nil } }

    /// How long the last complete write took, from its "writing" line to its "committed" line.
    var lastWriteDuration: Duration? {
        let lines = self.lines
        let arrivals = output.arrivals.withLock { $0 }
        guard let end = lines.lastIndex(where: { $0.hasPrefix("committed ") }), end > 0, end < arrivals.count else { return nil }
        return arrivals[end] - arrivals[end - 1]
    }

    /// Waits until `condition` holds of the writer's output.
    func wait(until condition: (WriterProcess) -> Bool, seconds: Double = 60) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition(self) {
            guard process.isRunning else {
                Issue.record("the writer exited (status \(process.terminationStatus)); output: \(lines.suffix(5))")
                throw CancellationError()
            }
            guard ContinuousClock.now < deadline else {
                Issue.record("the writer did not get there in \(seconds) s; output: \(lines.suffix(5))")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Waits until the file changes (size or modification time) from how it is now.
    static func waitForChange(of path: String, seconds: Double = 30) async throws {
        func stamp() -> [Int] {
            var info = stat()
            guard stat(path, &info) == 0 else { return [] }
            return [Int(info.st_size), info.st_mtim.tv_sec, info.st_mtim.tv_nsec]
        }
        let before = stamp()
        let deadline = ContinuousClock.now + .seconds(seconds)
        while stamp() == before, ContinuousClock.now < deadline {
            try await Task.sleep(for: .microseconds(100))
        }
    }

    func kill() async throws {
        Glibc.kill(process.processIdentifier, SIGKILL)
        while process.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        #expect(process.terminationReason == .uncaughtSignal)
        try await Task.sleep(for: .milliseconds(50))  // the last output
    }
}

@Suite("Store: crash safety (a real writer process killed with SIGKILL)")
struct CrashTests {
    static let batchSize = 200

    @Test("killed at several moments while writing, the reopened store holds whole batches only, every committed one, tables equal to the replica rebuilt from the log, and the outbox entries of every local message")
    func killedWhileWriting() async throws {
        try #require(
            FileManager.default.isExecutableFile(atPath: storeWriterBinary.path),
            "\(storeWriterBinary.path) is missing: build it first (swift build --build-tests)")
        let directory = try TemporaryDirectory()
        // (commits to wait for; then when to kill during the next write: nil as soon as the
        // WAL file changes, which is SQLite writing the transaction's pages; else this
        // fraction of the last write's duration after the writer said it starts writing)
        let moments: [(commits: Int, fraction: Double?)] = [(2, 0), (2, nil), (2, 0.9), (1, nil), (2, 1.0), (1, nil)]
        let wal = directory.url.appendingPathComponent("weft.sqlite-wal").path
        var lastCommitted = 0
        for (round, moment) in moments.enumerated() {
            let writer = try WriterProcess(directory: directory.url, batchSize: Self.batchSize, partBytes: 4096)
            try await writer.wait(until: { $0.committed.count >= moment.commits })
            let target = writer.committed.count + 1
            try await writer.wait(until: { $0.writing.count >= target })
            let started = ContinuousClock.now
            if let fraction = moment.fraction {
                let delay = (writer.lastWriteDuration ?? .zero) * fraction
                if delay > .zero { try await Task.sleep(for: delay) }
            } else {
                try await WriterProcess.waitForChange(of: wal)
            }
            let delay = ContinuousClock.now - started
            try await writer.kill()
            let printed = writer.committed.last ?? lastCommitted
            #expect(printed > lastCommitted, "round \(round) committed something")
            lastCommitted = printed

            let store = try Store(directory: directory.url, localUser: Self.localUser)
            let counts = try store.operationCounts()
            let total = counts.accepted + counts.pending + counts.rejected
            #expect(total % Self.batchSize == 0, "round \(round): \(total) operations is not whole batches")
            #expect(total >= printed, "round \(round): a committed batch is missing (\(total) < \(printed))")
            #expect(total <= printed + Self.batchSize, "round \(round): more than the batch in flight")
            #expect(counts.pending == 0 && counts.rejected == 0)
            lastCommitted = total
            print("crash round \(round): killed \(delay) into writing; \(printed) printed committed, \(total) in the log (the batch in flight \(total > printed ? "committed" : "rolled back"))")

            // The tables equal a replica rebuilt from the log.
            let replica = try store.replica
            try expectStore(store, matches: replica)
            // The log summaries were written in the same transactions: they equal a scan.
            try LogSummaryTests.expectSummariesMatchScan(store)

            // Every local message has its outbox entry, and every entry its message.
            let localMessages = Set(
                replica.conversationIDs.flatMap { replica.messages(in: $0) }.filter { $0.sender == Self.localUser }.map(\.id))
            let entries = try store.outboxEntries()
            #expect(Set(entries.map(\.message)) == localMessages, "round \(round): outbox entries and local messages")
            #expect(entries.allSatisfy { $0.state == .waiting })
            #expect(!localMessages.isEmpty || round == 0)
        }
        #expect(lastCommitted >= 6 * Self.batchSize)
    }

    /// The writer's local user (seed bytes all 1).
    static let localUser = NodeIdentity(seed: SecureBytes(copying: [UInt8](repeating: 1, count: NodeIdentity.seedByteCount))).publicKey
}
