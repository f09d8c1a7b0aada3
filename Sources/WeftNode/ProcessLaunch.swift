import Foundation
import Synchronization

/// Starts Foundation `Process`es one at a time in this process.
///
/// swift-corelibs-foundation's `Process.run()` crashed (a segfault in a `memcpy` inside it)
/// while other threads started processes at the same time: the test process starts dozens of
/// `weft` processes from parallel suites. LocalMesh and the CLI tests start theirs through here.
public enum ProcessLaunch {
    private static let lock = Mutex(())

    /// `process.run()`, while no other launch through here runs.
    public static func run(_ process: Process) throws {
        try lock.withLock { _ in try process.run() }
    }
}
