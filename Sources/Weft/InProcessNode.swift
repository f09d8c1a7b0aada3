import Logging
import ServiceLifecycle
import WeftCrypto
import WeftNode
import WeftStore

/// A Weft node running inside this process: the mesh node serving a store, and a client over
/// that same store, so what the client writes is what the node serves and what the node
/// stores reaches the client's change streams (the store publishes every commit, whoever
/// wrote it).
///
/// Run it as a `Service` (in a `ServiceGroup`, which stops it on SIGTERM/SIGINT) or call
/// `run()` in a task and cancel it. The node replicates (`Replicator`): what the client writes
/// reaches the node's peers, and what they send reaches the client.
public final class InProcessNode: Service, Sendable {
    /// The mesh node: listener, dialers, one session per peer.
    public let node: MeshNode
    /// The client API over the node's store.
    public let client: WeftClient
    /// Replication between the node's peers and its store.
    public let replicator: Replicator

    /// - Parameters:
    ///   - configuration: the node's identity, mesh key, addresses and policy; its identity
    ///     is the store's local user and the client's author.
    ///   - store: the store the node serves and the client reads and writes.
    ///   - replication: replication's bounds and timings.
    ///   - content: rich content (SPEC.md §17): the node then sets the *content* feature bit,
    ///     serves what the service holds and fetches content parts of the messages it stores.
    ///     Nil: the node keeps no content.
    ///   - onEvent: called for every node event, in order. The node's events are consumed by
    ///     replication, as `MeshNode` requires; a slow handler slows every peer's connection.
    public init(
        configuration: MeshNode.Configuration, store: Store, replication: ReplicationConfiguration = ReplicationConfiguration(),
        content: ContentService? = nil, logger: Logger = Logger(label: "weft.node"),
        onEvent: @escaping @Sendable (NodeEvent) -> Void = { _ in }
    ) throws(WeftError) {
        guard configuration.identity.publicKey == store.localUser else {
            throw .notPermitted("the store belongs to user \(store.localUser), not to this node's identity \(configuration.identity.publicKey)")
        }
        // The client follows and fetches content parts through the service (what it sends
        // stays inline unless the caller calls `useRichContent`).
        self.client = try WeftClient(store: store, identity: configuration.identity, contentTransfers: content)
        var configuration = configuration
        if content != nil { configuration.features.insert(.content) }
        self.node = MeshNode(configuration: configuration, store: store, logger: logger)
        do {
            self.replicator = try Replicator(
                node: node, localAuthor: client.localAuthor, configuration: replication, logger: logger, content: content,
                observer: onEvent)
        } catch {
            throw .storage("cannot read the store's log summaries: \(error)")
        }
    }

    /// The store shared by the node and the client.
    public var store: Store { node.store }

    /// The node's rich content, if it keeps any.
    public var content: ContentService? { replicator.content }

    /// Runs the node until graceful shutdown or cancellation, handing each event to `onEvent`.
    public func run() async throws {
        try await replicator.run()
    }
}
