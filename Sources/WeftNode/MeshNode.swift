import AsyncAlgorithms
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import WeftCrypto
import WeftStore
import WeftWire

/// A running Weft node: a listener, dialers for configured peers, and one `PeerSession` per
/// connection, all child tasks of `run()`. Serves its `store`; `events` reports what happens.
///
/// A connection's failure closes that connection only: each channel has its own handler and
/// state machine, each session catches its own errors, and the accept loop never sees them.
///
/// Memory per connection is bounded: the state machine holds at most one partial record
/// (1 MiB + 20 bytes), the session's inbound buffer `inboundBackPressure.highWatermark` events
/// plus what one socket read decodes to, and the channel's outbound buffer one payload per
/// `send(_:to:)` call waiting for its write.
public final class MeshNode: Service, Sendable {
    public struct Configuration: Sendable {
        public var identity: NodeIdentity
        public var meshKey: MeshKey
        public var displayName: String
        /// Where to listen; nil for a node that only dials.
        public var listenAddress: PeerAddress?
        /// Peers to dial and keep dialing.
        public var peers: [PeerAddress]
        public var policy: ChannelPolicy
        /// How often each connection's timers are checked.
        public var tickInterval: TimeAmount
        /// Redial delays grow from the first to the last value.
        public var redialDelays: [TimeAmount]

        public init(
            identity: NodeIdentity, meshKey: MeshKey, displayName: String,
            listenAddress: PeerAddress? = PeerAddress(host: "127.0.0.1", port: 0), peers: [PeerAddress] = [],
            policy: ChannelPolicy = .default, tickInterval: TimeAmount = .seconds(1),
            redialDelays: [TimeAmount] = [.milliseconds(250), .seconds(1), .seconds(2), .seconds(5), .seconds(15)]
        ) {
            self.identity = identity
            self.meshKey = meshKey
            self.displayName = displayName
            self.listenAddress = listenAddress
            self.peers = peers
            self.policy = policy
            self.tickInterval = tickInterval
            self.redialDelays = redialDelays
        }
    }

    /// A connection's inbound buffer: the socket is read again only once its session has taken
    /// the buffered events down to the low mark. An event carries at most one DATA payload.
    public static let inboundBackPressure = NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark(
        lowWatermark: 2, highWatermark: 8)
    /// A connection's outbound buffer: over `high` bytes queued, the channel is unwritable and
    /// `send(_:to:)` waits until it drains below `low`. A high mark of half a frame keeps about
    /// one full frame in flight per peer.
    public static let writeBufferWaterMark = ChannelOptions.Types.WriteBufferWaterMark(low: 128 * 1024, high: 512 * 1024)

    private struct Registry: ~Copyable {
        var started = false
        var stopped = false
        /// Every open connection, to close any that never got a session.
        var channels: [ObjectIdentifier: any Channel] = [:]
        /// The channel of each authenticated peer's session (the latest, if it connected twice).
        var sessions: [PublicIdentity: any Channel] = [:]
    }

    public let configuration: Configuration
    /// The store this node serves.
    public let store: Store
    /// What happens, in order per connection. Keep consuming it (see `NodeEvents`).
    public let events: NodeEvents
    let logger: Logger
    private let eventChannel: AsyncChannel<NodeEvent>
    private let channelConfiguration: ConnectionStateMachine.Configuration
    private let group: any EventLoopGroup
    private let registry = Mutex(Registry())

    public init(
        configuration: Configuration, store: Store, logger: Logger = Logger(label: "weft.node"),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.store = store
        self.logger = logger
        self.group = group
        self.channelConfiguration = ConnectionStateMachine.Configuration(
            identity: configuration.identity, meshKey: configuration.meshKey,
            displayName: configuration.displayName, policy: configuration.policy)
        let eventChannel = AsyncChannel<NodeEvent>()
        self.eventChannel = eventChannel
        self.events = NodeEvents(channel: eventChannel)
    }

    public var identity: PublicIdentity { configuration.identity.publicKey }

    /// Identities of peers with an authenticated connection now.
    public var connectedPeers: [PublicIdentity] { registry.withLock { Array($0.sessions.keys) } }

    // MARK: - Service

    /// Listens, dials, and serves every connection until graceful shutdown (SIGTERM/SIGINT
    /// through a `ServiceGroup`) or cancellation; then closes every connection with
    /// CLOSE(shutting down), waits until each is closed, and ends `events`. A node runs once.
    /// Throws if the listener cannot bind.
    public func run() async throws {
        try registry.withLock { registry in
            guard !registry.started else { throw PeerChannelError.alreadyRunning }
            registry.started = true
        }
        defer { eventChannel.finish() }
        do {
            try await cancelWhenGracefulShutdown { try await self.serve() }
        } catch is CancellationError {
            // Stopping is what cancellation asks for.
        }
        let leftovers = registry.withLock { registry in
            registry.stopped = true
            return Array(registry.channels.values)
        }
        // Connections accepted but never handed to a session.
        for channel in leftovers { try? await channel.close() }
    }

    /// The task tree: the accept loop in the group's body, one child task per session, one
    /// per dialer.
    private func serve() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            for peer in configuration.peers {
                group.addTask { await self.keepDialing(peer) }
            }
            guard let listen = configuration.listenAddress else { return }
            let listener = try await ServerBootstrap(group: self.group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.writeBufferWaterMark, value: Self.writeBufferWaterMark)
                .bind(host: listen.host, port: listen.port) { channel in
                    channel.eventLoop.makeCompletedFuture { try self.connection(on: channel, role: .responder) }
                }
            if let address = listener.channel.localAddress {
                logger.info("listening on \(address)")
                group.addTask { await self.report(.listening(address)) }
            }
            try await listener.executeThenClose { connections in
                for try await connection in connections {
                    group.addTask { _ = await PeerSession(connection: connection, direction: .inbound, node: self).run() }
                }
            }
        }
    }

    private func keepDialing(_ peer: PeerAddress) async {
        var attempt = 0
        while !Task.isCancelled {
            var wasAuthenticated = false
            do {
                let connection = try await ClientBootstrap(group: group)
                    .channelOption(.socketOption(.tcp_nodelay), value: 1)
                    .channelOption(.writeBufferWaterMark, value: Self.writeBufferWaterMark)
                    .connectTimeout(.seconds(5))
                    .connect(host: peer.host, port: peer.port) { channel in
                        channel.eventLoop.makeCompletedFuture { try self.connection(on: channel, role: .initiator) }
                    }
                wasAuthenticated = await PeerSession(connection: connection, direction: .outbound, node: self).run()
            } catch {
                logger.info("cannot reach \(peer): \(error)")
            }
            attempt = wasAuthenticated ? 0 : min(attempt + 1, configuration.redialDelays.count - 1)
            do {
                try await Task.sleep(for: .nanoseconds(configuration.redialDelays[attempt].nanoseconds))
            } catch {
                return  // cancelled: the node is stopping
            }
        }
    }

    /// Sets up a new connection on its event loop: the protocol handler, then the async
    /// channel its session reads and writes through.
    private func connection(
        on channel: any Channel, role: ConnectionStateMachine.Role
    ) throws -> NIOAsyncChannel<PeerChannelEvent, ByteBuffer> {
        let id = ObjectIdentifier(channel)
        let accepted = registry.withLock { registry in
            guard !registry.stopped else { return false }
            registry.channels[id] = channel
            return true
        }
        guard accepted else { throw ChannelError.ioOnClosedChannel }
        channel.closeFuture.whenComplete { [self] _ in registry.withLock { _ = $0.channels.removeValue(forKey: id) } }
        try channel.pipeline.syncOperations.addHandler(
            PeerChannelHandler(
                role: role, configuration: channelConfiguration, tickInterval: configuration.tickInterval, logger: logger))
        return try NIOAsyncChannel(
            wrappingChannelSynchronously: channel,
            configuration: .init(
                backPressureStrategy: Self.inboundBackPressure, inboundType: PeerChannelEvent.self,
                outboundType: ByteBuffer.self))
    }

    // MARK: - Sessions

    func sessionAuthenticated(_ peer: PublicIdentity, channel: any Channel) {
        registry.withLock { $0.sessions[peer] = channel }
    }

    func sessionEnded(channel: any Channel) {
        registry.withLock { registry in
            registry.sessions = registry.sessions.filter { $0.value !== channel }
        }
    }

    /// Hands an event to the consumer, waiting until it takes it (see `NodeEvents`). Returns
    /// at once, dropping the event, if the node is stopping.
    func report(_ event: NodeEvent) async {
        await eventChannel.send(event)
    }

    // MARK: - Sending

    /// Sends application bytes to an authenticated peer as one DATA frame.
    ///
    /// Returns once the frame is written to the socket, so a sender waits while the peer's
    /// connection is backed up (over `writeBufferWaterMark.high` bytes queued, the kernel's
    /// buffers full): a slow peer slows its senders instead of filling memory, and each
    /// waiting sender holds one payload. Written is not delivered.
    ///
    /// (Not through the session's `NIOAsyncChannelOutboundWriter`: its writes hop to the event
    /// loop without waiting, so one fast sender queues without bound before the writer sees
    /// the channel turn unwritable. Awaiting each write's promise bounds it, and reports a
    /// write the connection refused.)
    /// - Throws: `PeerChannelError.payloadTooLarge` over `WireConstants.maxDataPayloadByteCount`
    ///   bytes, `.unknownPeer` without an authenticated connection to `peer`,
    ///   `.connectionClosed` if the connection closed before the frame was written.
    public func send(_ bytes: ByteBuffer, to peer: PublicIdentity) async throws(PeerChannelError) {
        guard bytes.readableBytes <= WireConstants.maxDataPayloadByteCount else {
            throw .payloadTooLarge(bytes.readableBytes)
        }
        guard let channel = registry.withLock({ $0.sessions[peer] }) else { throw .unknownPeer(peer) }
        do {
            try await channel.writeAndFlush(bytes).get()
        } catch let error as PeerChannelError {
            throw error
        } catch {
            throw .connectionClosed
        }
    }
}
