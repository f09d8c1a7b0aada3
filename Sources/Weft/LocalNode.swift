import Foundation
import Logging
import WeftCrypto
import WeftNode

/// A whole node running inside this program on its home, as `weft node` runs it (the home's
/// lock, store, listener, dialers, replication and control socket), with a client wired to it.
///
/// ```swift
/// let node = try await LocalNode.start(home: URL(fileURLWithPath: "/tmp/alice"), peers: ["127.0.0.1:7400"])
/// let conversation = try await node.client.createConversation(with: [bob])
/// _ = try await node.client.send([MessagePart(mimeType: "text/plain", data: Array("hi".utf8))], in: conversation.id)
/// await node.stop()
/// ```
public final class LocalNode: Sendable {
    /// The client over the node's store: what it writes, the node replicates.
    public let client: WeftClient
    /// The daemon: its mesh node, replicator and control socket.
    public let daemon: NodeDaemon
    /// Where the node listens (`host:port`).
    public let address: String
    private let task: Task<Void, any Error>

    private init(daemon: NodeDaemon, address: String, task: Task<Void, any Error>) {
        self.daemon = daemon
        self.client = daemon.client
        self.address = address
        self.task = task
    }

    /// Opens the home (created by `weft init`), starts its node and returns once it listens.
    /// - Parameters:
    ///   - passphrase: the identity's passphrase, if it is protected.
    ///   - listen: `host:port` to listen on; port 0 picks a free one.
    ///   - peers: `host:port` of nodes to dial and keep dialing.
    ///   - discoveryInterfaces: LAN discovery (SPEC.md §16) on these interfaces, or on every
    ///     one it can use if empty; nil (the default) leaves it off. It needs a listener other
    ///     than loopback (`0.0.0.0:0`, say).
    /// - Throws: one sentence when the home has no identity, the passphrase is wrong, another
    ///   node runs on the home, the store does not open, or discovery cannot run as asked.
    public static func start(
        home: URL, passphrase: SecureBytes? = nil, listen: String = "127.0.0.1:0", peers: [String] = [],
        discoveryInterfaces: [String]? = nil, logger: Logger = Logger(label: "weft.node")
    ) async throws -> LocalNode {
        let nodeHome = NodeHome(directory: home)
        guard let listenAddress = PeerAddress(listen) else { throw NodeDaemonError("\"\(listen)\" is not host:port.") }
        let dial = try peers.map { text in
            guard let address = PeerAddress(text) else { throw NodeDaemonError("\"\(text)\" is not host:port.") }
            return address
        }
        let lock = try HomeLock(home: nodeHome)
        let identity = try nodeHome.openIdentity(passphrase: passphrase)
        let (ready, readyContinuation) = AsyncStream<String>.makeStream()
        let daemon = try NodeDaemon(
            configuration: .init(
                home: nodeHome,
                node: .init(
                    identity: identity, meshKey: try nodeHome.meshKey(), displayName: nodeHome.displayName(),
                    listenAddress: listenAddress, peers: dial),
                discoveryInterfaces: discoveryInterfaces),
            lock: lock, logger: logger, onReady: { readyContinuation.yield($0) })
        // Unstructured on purpose: the node outlives this call, as the caller asked. It is owned
        // by the returned LocalNode, and `stop()` cancels it and waits for it to end.
        let task = Task {
            defer { readyContinuation.finish() }
            try await daemon.run()
        }
        var iterator = ready.makeAsyncIterator()
        guard let address = await iterator.next() else {
            _ = try await task.value  // throws why it stopped, if it failed
            throw NodeDaemonError("The node stopped before it listened.")
        }
        return LocalNode(daemon: daemon, address: address, task: task)
    }

    /// Stops the node (CLOSE to its peers, control socket removed) and waits until it stopped.
    public func stop() async {
        task.cancel()
        _ = try? await task.value
    }
}
