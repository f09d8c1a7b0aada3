import Foundation
import Logging
import WeftCrypto
import WeftNode

/// A whole node running inside this program on its home, as `weft node` runs it (the home's
/// lock, store, listener, dialers, replication and control socket), with a client wired to it.
/// This is the way to run a node in a program.
///
/// ```swift
/// var options = LocalNode.Options()
/// options.peers = [PeerAddress(host: "127.0.0.1", port: 7400)]
/// let node = try await LocalNode.start(home: URL(fileURLWithPath: "/tmp/alice"), options: options)
/// let conversation = try await node.client.createConversation(with: [bob])
/// _ = try await node.client.send([MessagePart(mimeType: "text/plain", data: Array("hi".utf8))], in: conversation.id)
/// await node.stop()
/// ```
///
/// (`InProcessNode` is the part underneath: a mesh node and a client over a store you open
/// yourself, without a home, a lock or a control socket.)
public final class LocalNode: Sendable {
    /// How to run the node; every field has the default `weft node` uses.
    public struct Options: Sendable {
        /// The identity's passphrase, if it is protected.
        public var passphrase: SecureBytes?
        /// Where to listen; port 0 picks a free one.
        public var listen = PeerAddress(host: "127.0.0.1", port: 0)
        /// Nodes to dial and keep dialing (besides those the home remembers).
        public var peers: [PeerAddress] = []
        /// LAN discovery (SPEC.md §16) on these interfaces, or on every one it can use if empty;
        /// nil leaves it off. It needs a listener other than loopback (`0.0.0.0:0`, say).
        public var discoveryInterfaces: [String]?
        /// How long a message may wait for delivery before it fails.
        public var timeToLive: Duration = WeftClient.defaultTimeToLive
        /// What content the node fetches by itself (by default every part of its user's
        /// conversations, and of those it relays), and its bounds.
        public var content = ContentConfiguration()
        public var logger = Logger(label: "weft.node")

        public init() {}
    }

    /// The client over the node's store: what it writes, the node replicates.
    public let client: WeftClient
    /// The daemon: its mesh node, replicator and control socket (for this package's tests).
    package let daemon: NodeDaemon
    /// Where the node listens.
    public let address: PeerAddress
    /// The node's rich content: add files to send (`importContent`), follow transfers
    /// (`status(of:)`, `progress(of:)`), fetch on demand (`download`), copy out (`contentFile`).
    /// The client follows message parts through it (`contentProgress(ofPart:in:)`).
    public var content: ContentService { daemon.content }
    private let task: Task<Void, any Error>

    private init(daemon: NodeDaemon, address: PeerAddress, task: Task<Void, any Error>) {
        self.daemon = daemon
        self.client = daemon.client
        self.address = address
        self.task = task
    }

    /// Opens the home (created by `weft init`), starts its node and returns once it listens.
    /// - Throws: one sentence when the home has no identity, the passphrase is wrong, another
    ///   node runs on the home, the store does not open, or discovery cannot run as asked.
    public static func start(home: URL, options: Options = Options()) async throws -> LocalNode {
        let nodeHome = NodeHome(directory: home)
        let lock = try HomeLock(home: nodeHome)
        let identity = try nodeHome.openIdentity(passphrase: options.passphrase)
        let (ready, readyContinuation) = AsyncStream<String>.makeStream()
        var configuration = NodeDaemon.Configuration(
            home: nodeHome,
            node: .init(
                identity: identity, meshKey: try nodeHome.meshKey(), displayName: nodeHome.displayName(),
                listenAddress: options.listen, peers: options.peers),
            timeToLive: options.timeToLive, discoveryInterfaces: options.discoveryInterfaces)
        configuration.content = options.content
        let daemon = try NodeDaemon(
            configuration: configuration, lock: lock, logger: options.logger, onReady: { readyContinuation.yield($0) })
        // Unstructured on purpose: the node outlives this call, as the caller asked. It is owned
        // by the returned LocalNode, and `stop()` cancels it and waits for it to end.
        let task = Task {
            defer { readyContinuation.finish() }
            try await daemon.run()
        }
        var iterator = ready.makeAsyncIterator()
        guard let text = await iterator.next() else {
            _ = try await task.value  // throws why it stopped, if it failed
            throw NodeDaemonError("The node stopped before it listened.")
        }
        guard let address = PeerAddress(text) else { throw NodeDaemonError("The node listens at \"\(text)\", which is not host:port.") }
        return LocalNode(daemon: daemon, address: address, task: task)
    }

    /// Stops the node (CLOSE to its peers, control socket removed) and waits until it stopped.
    public func stop() async {
        task.cancel()
        _ = try? await task.value
    }
}
