import Foundation
import WeftNode
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

extension SpawnedProcess {
    /// A daemon in `namespace`, its output appended to `log`. (Not Foundation's Process:
    /// avahi-daemon closes every descriptor it inherits at start, which would block
    /// Foundation's one reaping thread until avahi ends.)
    convenience init(_ arguments: [String], environment: [String: String], log: String) throws {
        if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? output.close() }
        try output.seekToEnd()
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        try self.init(
            executable: URL(fileURLWithPath: arguments[0]), arguments: Array(arguments.dropFirst()), environment: env,
            output: output.fileDescriptor, error: output.fileDescriptor)
    }

    /// SIGTERM, then SIGKILL if it has not ended within two seconds; reaped either way.
    func stop() {
        signal(SIGTERM)
        for _ in 0..<200 {
            if exit != nil { return }
            usleep(10_000)
        }
        signal(SIGKILL)
        _ = waitUntilExit()
    }
}
