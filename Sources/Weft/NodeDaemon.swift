import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import WeftControl
import WeftCrypto
import WeftNode
import WeftStore

/// A whole node on its home, as `weft node` runs it: the home's lock (one node per home), the
/// store, the mesh node, and the control socket the CLI drives it through (SPEC.md §11, §15).
///
/// Run it as a `Service` in a `ServiceGroup`: on SIGTERM/SIGINT the mesh node closes its
/// connections with CLOSE(shutting down), the control socket and address file are removed,
/// and `run()` returns; the store closes when the daemon is released.
package final class NodeDaemon: Service, Sendable {
    public struct Configuration: Sendable {
        public var home: NodeHome
        public var node: MeshNode.Configuration
        /// How long a message may wait for delivery (`--ttl`).
        public var timeToLive: Duration
        /// How long relayed conversations are kept (`--retention-days`).
        public var retentionDays: Int
        /// The interfaces LAN discovery runs on (`--discovery-interface`; empty: every one
        /// that can, `DiscoveryInterface.select`), or nil with discovery off.
        public var discoveryInterfaces: [String]?
        /// What content the node fetches by itself, and its bounds.
        public var content = ContentConfiguration()

        public init(
            home: NodeHome, node: MeshNode.Configuration, timeToLive: Duration = WeftClient.defaultTimeToLive,
            retentionDays: Int = 30, discoveryInterfaces: [String]? = nil
        ) {
            self.home = home
            self.node = node
            self.timeToLive = timeToLive
            self.retentionDays = retentionDays
            self.discoveryInterfaces = discoveryInterfaces
        }
    }

    public let configuration: Configuration
    public let node: MeshNode
    public let client: WeftClient
    /// Replication between the node's peers and its store.
    public let replicator: Replicator
    /// Connected peers and the names the node has met.
    public let directory: PeerDirectory
    /// Rich content in the home's `content/`: added, served and fetched (SPEC.md §17).
    public let content: ContentService
    /// LAN discovery, when it is on.
    public let discovery: LANDiscovery?
    private let handler: ClientControlHandler
    private let lock: HomeLock
    private let logger: Logger
    private let onReady: @Sendable (String) -> Void

    /// Takes the home's lock, then opens the store. Throws one sentence if another node holds
    /// the home or the store does not open.
    /// - Parameter onReady: called with the listener's `host:port` once the node listens and
    ///   the control socket serves (the address file is written just before).
    /// - Parameter lock: the home's lock, if the caller took it already (before asking for a
    ///   passphrase, say); else it is taken here.
    public init(
        configuration: Configuration, lock: HomeLock? = nil, logger: Logger = Logger(label: "weft.node"),
        onReady: @escaping @Sendable (String) -> Void = { _ in }
    ) throws {
        let home = configuration.home
        self.lock = try lock ?? HomeLock(home: home)
        let identity = configuration.node.identity
        let store: Store
        do {
            store = try Store(directory: home.directory, localUser: identity.publicKey)
        } catch {
            throw NodeDaemonError("Cannot open the store \(home.directory.appendingPathComponent(Store.fileName).path): \(error).")
        }
        self.configuration = configuration
        self.logger = logger
        self.onReady = onReady
        // Peers added at run time before (CONNECT), and where peers last said they listen, are
        // dialed again, as added ones; what peers announce from now on is remembered.
        let remembered = RememberedPeers(home: home)
        var nodeConfiguration = configuration.node
        // The directory below keeps names and the replicator answers and sends NAMES (§14.12).
        nodeConfiguration.features.insert(.names)
        // The content service below answers and sends the content-transfer messages (§17.8).
        nodeConfiguration.features.insert(.content)
        do {
            content = ContentService(
                store: store, contentStore: try ContentStore(directory: home.directory), configuration: configuration.content,
                logger: logger)
        } catch {
            throw NodeDaemonError("Cannot open the content directory in \(home.directory.path): \(error).")
        }
        // Parts over 2 KB the local user sends become rich content this service keeps (§17);
        // the client follows and fetches content parts through it.
        client = try WeftClient(
            store: store, identity: identity, timeToLive: configuration.timeToLive, contentImporter: content, contentTransfers: content)
        nodeConfiguration.addressAnnounced = { [logger] user, address, dialed in
            do {
                try remembered.announced(address, by: user, dialed: dialed)
            } catch {
                logger.warning("\(error)")
            }
        }
        let node = MeshNode(configuration: nodeConfiguration, store: store, logger: logger)
        self.node = node
        if let names = configuration.discoveryInterfaces {
            do {
                discovery = try LANDiscovery(node: node, interfaceNames: names, logger: logger)
            } catch {
                throw NodeDaemonError(error.description)
            }
        } else {
            discovery = nil
        }
        let (entries, unreadable) = remembered.load()
        for line in unreadable { logger.warning("ignoring \"\(line)\" in \(remembered.file.path): it is not host:port [user]") }
        for entry in entries where !configuration.node.peers.contains(entry.address) {
            node.connect(to: entry.address, how: .added, expecting: entry.user)
        }
        let directory = PeerDirectory(localUser: identity.publicKey, clock: LocalAuthor.systemClock)
        self.directory = directory
        var replication = ReplicationConfiguration()
        replication.retention = .seconds(Int64(configuration.retentionDays) * 24 * 3600)
        let events = EventRelay()
        replicator = try Replicator(
            node: node, localAuthor: client.localAuthor, configuration: replication, logger: logger, directory: directory,
            content: content, observer: { event in events.take(event) })
        handler = ClientControlHandler(
            client: client, directory: directory,
            settings: .init(
                displayName: configuration.node.displayName, timeToLive: configuration.timeToLive,
                retentionDays: configuration.retentionDays, startedAt: LocalAuthor.systemClock()),
            node: node, replication: ReplicatorFigures(replicator: replicator), discovery: discovery,
            rememberedPeers: remembered, content: content)
        events.daemon = self
    }

    /// Serves the control socket and runs the mesh node (and discovery, once the node
    /// listens) until graceful shutdown or cancellation; then removes the control socket and
    /// the address file. Discovery says its goodbye as the node closes its connections.
    public func run() async throws {
        let home = configuration.home
        let server = ControlServer(socketPath: home.controlSocket.path, handler: handler, logger: logger)
        defer { unlink(home.addressFile.path) }
        try await withThrowingDiscardingTaskGroup { group in
            // A child of this group: it ends with the node (cancelled below) or at graceful
            // shutdown, after its goodbye.
            if let discovery { group.addTask { await discovery.run() } }
            try await server.serve { try await self.replicator.run() }
            group.cancelAll()
        }
    }

    /// Every node event, from the replicator (which consumes the node's events and records
    /// them in the directory first).
    fileprivate func take(_ event: NodeEvent) {
        switch event {
        case .listening(let address):
            let text = address.ipAddress.map { PeerAddress(host: $0, port: address.port ?? 0).description } ?? "\(address)"
            handler.listening(at: text)
            do {
                try configuration.home.writeAddress(text)
            } catch {
                logger.error("cannot write the address file: \(error)")
            }
            discovery?.listening(onPort: address.port ?? 0)
            onReady(text)
        case .peerAuthenticated, .connectionEnded, .pong, .data:
            break  // logged by the connection; the directory keeps what `weft peers` shows
        }
    }
}

/// Hands node events to the daemon once it exists (the replicator is made before it).
/// Holds it weakly: the daemon owns the replicator, which owns this relay.
private final class EventRelay: Sendable {
    private struct Weak { weak var daemon: NodeDaemon? }
    private let target = Mutex(Weak())
    var daemon: NodeDaemon? {
        get { target.withLock { $0.daemon } }
        set { target.withLock { $0.daemon = newValue } }
    }
    func take(_ event: NodeEvent) { daemon?.take(event) }
}

/// Why a daemon cannot start, in one sentence.
public struct NodeDaemonError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
