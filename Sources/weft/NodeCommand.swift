import ArgumentParser
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Weft
import WeftCrypto
import WeftNode
import WeftStore
import WeftWire

struct NodeCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "node",
        abstract: "Run a node on its home: listen, dial peers, serve the control socket the other commands use. Stops on SIGINT or SIGTERM."
    )

    @OptionGroup var home: HomeOptions

    @Option(
        help: "Address to listen on; port 0 picks a free port. (default: 0.0.0.0:0 with discovery on, else 127.0.0.1:0)",
        transform: parseAddress)
    var listen: PeerAddress?

    @Option(name: .customLong("peer"), help: "A peer to dial, host:port (repeatable).", transform: parseAddress)
    var peers: [PeerAddress] = []

    @Option(help: "Find the mesh's other nodes on the LAN over multicast DNS, and be found: on or off. (default: on, but off with a loopback --listen, which nobody on the LAN can dial)")
    var discovery: DiscoverySwitch?

    /// Discovery as asked for, or as the listening address makes sensible.
    var discoveryIsOn: Bool { discovery.map { $0 == .on } ?? !(listen.map { Self.isLoopback($0.host) } ?? false) }

    /// Whether `host` names this machine's loopback (127.0.0.0/8, ::1, localhost).
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    @Option(name: .customLong("discovery-interface"), help: "An interface to run discovery on (repeatable; default: every one with IPv4 and multicast but loopback).")
    var discoveryInterfaces: [String] = []

    @Option(help: "Read the passphrase from this file (else $WEFT_PASSPHRASE, else a prompt).")
    var passphraseFile: String?

    @Option(help: "Seconds without sending before a keepalive ping.")
    var pingInterval: Int = 15

    @Option(help: "Seconds without receiving before the connection is closed.")
    var idleTimeout: Int = 60

    @Option(name: .customLong("ttl"), help: "Seconds a message may wait for delivery before it fails.")
    var timeToLive: Int = 12 * 3600

    @Option(help: "Days to keep conversations this node only relays.")
    var retentionDays: Int = 30

    @OptionGroup(title: "Rich content") var content: ContentOptions

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    func validate() throws {
        guard pingInterval > 0, idleTimeout > pingInterval else {
            throw ValidationError("--idle-timeout must be longer than --ping-interval, and both positive.")
        }
        guard timeToLive > 0, timeToLive <= Int(UInt32.max) else { throw ValidationError("--ttl must be from 1 to 4294967295 seconds.") }
        guard discoveryIsOn || discoveryInterfaces.isEmpty else {
            throw ValidationError("--discovery-interface needs --discovery on.")
        }
        guard retentionDays > 0, retentionDays <= 36500 else { throw ValidationError("--retention-days must be from 1 to 36500.") }
    }

    func execute() async throws {
        bootstrapLogging(level: logLevel)
        HeapTrim.keepFreedBuffers()
        let logger = Logger(label: "weft.node")
        // First of all: a key log that cannot be opened is the one sentence this command says.
        let keyLog = try openKeyLog()
        if discovery == nil, !discoveryIsOn, let listen {
            warn("LAN discovery is off: \(listen.host) is loopback, which nobody on the LAN can dial (listen on 0.0.0.0 or a LAN address to be found)")
        }
        let nodeHome = home.nodeHome
        // First the lock: a second node on this home stops here, before any passphrase.
        _ = try nodeHome.publicIdentity()
        let lock = try HomeLock(home: nodeHome)
        let identity: NodeIdentity
        if try nodeHome.identityIsProtected() {
            identity = try nodeHome.openIdentity(passphrase: PassphraseSource.read(file: passphraseFile, confirm: false))
        } else {
            logger.warning("the identity key in \(nodeHome.identityFile.path) is stored unprotected")
            identity = try nodeHome.openIdentity(passphrase: nil)
        }
        var configuration = NodeDaemon.Configuration(
            home: nodeHome,
            node: .init(
                identity: identity, meshKey: try nodeHome.meshKey(), displayName: nodeHome.displayName(),
                listenAddress: listen ?? PeerAddress(host: discoveryIsOn ? "0.0.0.0" : "127.0.0.1", port: 0), peers: peers,
                policy: ChannelPolicy(pingInterval: .seconds(Int64(pingInterval)), idleTimeout: .seconds(Int64(idleTimeout)))),
            timeToLive: .seconds(timeToLive), retentionDays: retentionDays,
            discoveryInterfaces: discoveryIsOn ? discoveryInterfaces : nil)
        configuration.content = content.configuration
        configuration.node.keyLog = keyLog
        let daemon = try NodeDaemon(
            configuration: configuration, lock: lock, logger: logger,
            onReady: { address in say("listening on \(address)") })
        logger.info("node \(identity.publicKey) (\(nodeHome.displayName())) starting; control socket \(nodeHome.controlSocket.path)")

        let services = ServiceGroup(
            configuration: .init(services: [daemon], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await services.run()
    }
}

/// The key log `WEFT_KEYLOG` names (SPEC.md §18), with a warning on every start that anyone
/// who reads it can decrypt this node's traffic; nil when the variable is unset or empty.
private func openKeyLog() throws -> KeyLogFile? {
    guard let path = ProcessInfo.processInfo.environment[KeyLogFile.environmentVariable], !path.isEmpty else { return nil }
    do {
        let file = try KeyLogFile(path: path)
        warn("\(KeyLogFile.environmentVariable) is set: writing the secrets of every connection to \(path); anyone who can read it can decrypt this node's traffic")
        return file
    } catch {
        throw CLIError("\(error)")
    }
}

/// `--discovery on|off`.
enum DiscoverySwitch: String, ExpressibleByArgument, CaseIterable {
    case on, off
}

/// Parses `host:port` for ArgumentParser, with one sentence on failure.
func parseAddress(_ text: String) throws -> PeerAddress {
    guard let address = PeerAddress(text) else {
        throw ValidationError("\"\(text)\" is not host:port with a port from 0 to 65535.")
    }
    return address
}

extension SocketAddress {
    /// `127.0.0.1:4000` or `[::1]:4000`, the form `--peer` accepts.
    var displayForm: String {
        guard let ip = ipAddress, let port else { return description }
        return PeerAddress(host: ip, port: port).description
    }
}

/// The home's store (`weft.sqlite` in the home), or one sentence saying why it cannot open.
func openStore(_ home: NodeHome, localUser: PublicIdentity) throws -> Store {
    do {
        return try Store(directory: home.directory, localUser: localUser)
    } catch {
        throw CLIError("Cannot open the store \(home.directory.appendingPathComponent(Store.fileName).path): \(error).")
    }
}
