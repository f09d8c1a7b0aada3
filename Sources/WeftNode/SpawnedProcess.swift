private import CSpawn
import Foundation
import Synchronization

/// A child process started with `posix_spawn`, for the test kit and the tests that run `weft`
/// (and the daemons they need).
///
/// Not Foundation's `Process`: swift-corelibs-foundation's `Process.run()` crashed now and
/// then (a segfault in a `memcpy` inside it, with launches already serialized) while the test
/// process ran many suites at once; it also ties each child to a run loop of whichever
/// cooperative thread started it. This is the little a test needs: the program, its
/// arguments and environment, standard input from /dev/null, standard output and error to
/// given descriptors, and every other descriptor closed in the child.
public final class SpawnedProcess: Sendable {
    /// How a process ended.
    public enum Exit: Hashable, Sendable, CustomStringConvertible {
        case status(Int32)
        case signal(Int32)

        public var description: String {
            switch self {
            case .status(let status): "exited with status \(status)"
            case .signal(let signal): "ended by signal \(signal)"
            }
        }
    }

    public let identifier: Int32
    public let executable: URL
    public let arguments: [String]
    /// How it ended, once reaped.
    private let ended = Mutex<Exit?>(nil)

    /// Starts `executable` with `arguments` (not counting the program's name) and exactly
    /// `environment`; its standard output and error go to `output` and `error`, its standard
    /// input reads /dev/null. The child is in a process group of its own, as Foundation's
    /// children are, so a terminal's Ctrl-C reaches only the test process.
    public init(executable: URL, arguments: [String], environment: [String: String], output: Int32, error: Int32) throws {
        self.executable = executable
        self.arguments = arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, error, 2)
        // Nothing else of this process leaks into the child (another child's pipe, a socket).
        weft_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A clean start: no signal blocked (the test process blocks SIGTERM, among others,
        // and a child would inherit that), and the usual ones at their defaults.
        var none = sigset_t()
        sigemptyset(&none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)

        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable.path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw SpawnError("Cannot run \(executable.path): \(String(cString: strerror(result))).")
        }
        identifier = pid
    }

    /// How the process ended; nil while it runs. Reaps it the first time it is seen ended.
    public var exit: Exit? {
        ended.withLock { ended in
            if let ended { return ended }
            var status: Int32 = 0
            guard waitpid(identifier, &status, WNOHANG) == identifier else { return nil }
            // WIFSIGNALED / WTERMSIG / WEXITSTATUS, which Swift does not import as macros.
            let signal = status & 0x7f
            ended = signal != 0 && signal != 0x7f ? .signal(signal) : .status((status >> 8) & 0xff)
            return ended
        }
    }

    public var isRunning: Bool { exit == nil }

    /// Sends `signal` while the process runs (never to a reaped identifier, which the system
    /// may have given to another process).
    public func signal(_ signal: Int32) {
        ended.withLock { ended in
            if ended == nil { _ = kill(identifier, signal) }
        }
    }

    /// Polls until the process has ended; nil if it still runs after `timeout`.
    public func waitForExit(timeout: Duration) async -> Exit? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let exit { return exit }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return exit
    }

    /// Blocks the calling thread until the process ends (for short commands run from
    /// synchronous code).
    public func waitUntilExit() -> Exit {
        ended.withLock { ended in
            if let ended { return ended }
            var status: Int32 = 0
            while waitpid(identifier, &status, 0) == -1 && errno == EINTR {}
            let signal = status & 0x7f
            let exit: Exit = signal != 0 && signal != 0x7f ? .signal(signal) : .status((status >> 8) & 0xff)
            ended = exit
            return exit
        }
    }
}

/// Why a process could not start, in one sentence.
public struct SpawnError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
