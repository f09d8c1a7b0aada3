import Foundation
import Synchronization
import Testing

/// Debian's avahi-daemon inside one namespace of a `NamespaceLAN`, with a D-Bus system bus of
/// its own (a dbus-daemon listening on a socket in a temporary directory, not the machine's):
/// the standard mDNS responder that Weft must share port 5353 with, and that `avahi-browse`
/// asks. Both processes stop when it is stopped or released.
final class AvahiDaemon: @unchecked Sendable {
    /// Why avahi cannot run here (a program missing), or nil.
    static let unavailable: String? = {
        for program in ["/usr/sbin/avahi-daemon", "/usr/bin/avahi-browse", "/usr/bin/dbus-daemon"]
        where !FileManager.default.isExecutableFile(atPath: program) {
            return "\(program) is missing: ./Tools/install-test-deps installs avahi-daemon, avahi-utils and dbus"
        }
        return nil
    }()

    let namespace: String
    /// What avahi's clients need to find its bus.
    let environment: [String: String]
    private let logFile: String
    private let bus: SpawnedProcess
    private let daemon: SpawnedProcess

    /// Starts the bus, then avahi on `interface` (IPv4 only; no host records of its own
    /// beyond its address, no wide-area), and waits until avahi says it is up.
    init(namespace: String, interface: String = "eth0", directory: TemporaryDirectory) async throws {
        self.namespace = namespace
        let socket = directory.path("system_bus_socket")
        let busConfig = try directory.write("bus.conf", """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """)
        let avahiConfig = try directory.write("avahi-daemon.conf", """
            [server]
            use-ipv4=yes
            use-ipv6=no
            allow-interfaces=\(interface)
            enable-dbus=yes
            [wide-area]
            enable-wide-area=no
            [publish]
            publish-hinfo=no
            publish-workstation=no
            """)
        environment = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(socket)"]
        logFile = directory.path("avahi.log")
        bus = try SpawnedProcess(
            [NamespaceLAN.ip, "netns", "exec", namespace, "/usr/bin/dbus-daemon", "--config-file=\(busConfig)", "--nofork", "--nopidfile"],
            environment: [:], log: directory.path("dbus.log"))
        try await eventually("the bus listens at \(socket)") { FileManager.default.fileExists(atPath: socket) }
        daemon = try SpawnedProcess(
            [NamespaceLAN.ip, "netns", "exec", namespace, "/usr/sbin/avahi-daemon", "-f", avahiConfig,
             "--no-drop-root", "--no-chroot", "--no-rlimits", "--no-proc-title"],
            environment: environment, log: logFile)
        try await eventually("avahi says it is up") { self.log.contains("Server startup complete") }
    }

    /// `avahi-browse ARGUMENTS` in the namespace, through this avahi; its output.
    func browse(_ arguments: [String]) async throws -> String {
        let browser = try ChildProcess(
            arguments, environment: environment, namespace: namespace, executable: URL(fileURLWithPath: "/usr/bin/avahi-browse"))
        let status = try await browser.wait()
        #expect(status == 0, "avahi-browse: \(browser.stderr)")
        return browser.stdout
    }

    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    func stop() {
        daemon.stop()
        bus.stop()
    }

    deinit { stop() }
}

/// A daemon spawned with posix_spawn rather than Foundation's Process, and reaped here.
///
/// Foundation's Process learns that a child exited when a socket the child inherits closes,
/// then waits for it in its one reaping thread; avahi-daemon closes every descriptor it
/// inherits at start, which would block that thread until avahi ends, and no other child of
/// the test would be seen to exit meanwhile. The child also starts with no signals blocked
/// (a Process child inherits the test's blocked mask, SIGTERM among it). Output goes to `log`.
final class SpawnedProcess: @unchecked Sendable {
    // @unchecked: `pid` is set once; `stopped` is only touched from stop(), behind a lock.
    private let pid: pid_t
    private let stopped = Mutex(false)

    init(_ arguments: [String], environment: [String: String], log: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else { throw MulticastProbeError("cannot start \(arguments[0]): error \(result)") }
        self.pid = pid
    }

    /// SIGTERM, then SIGKILL if it has not ended within two seconds; reaped either way.
    func stop() {
        guard !stopped.withLock({ let was = $0; $0 = true; return was }) else { return }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<200 {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }

    deinit { stop() }
}
