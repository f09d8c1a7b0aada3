import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
import WeftCrypto
import WeftWire

/// A running Weft node: a listener, dialers for configured peers, and one secure channel per
/// connection. Runs as a `Service`; `events` reports what happens.
///
/// A connection's failure closes that connection only: each channel has its own handler and
/// state machine, and the accept loop never sees per-connection errors.
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

    private struct State: ~Copyable {
        var listener: Channel?
        var channels: [ObjectIdentifier: Channel] = [:]
        var authenticated: [PublicIdentity: Channel] = [:]
        /// Channels that reached authentication, so a dialer knows to reset its backoff.
        var everAuthenticated: Set<ObjectIdentifier> = []
        var dialers: [Task<Void, Never>] = []
        var stopping = false
    }

    public let configuration: Configuration
    public let events: AsyncStream<NodeEvent>
    private let eventSink: AsyncStream<NodeEvent>.Continuation
    private let channelConfiguration: ConnectionStateMachine.Configuration
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state = Mutex(State())

    public init(
        configuration: Configuration, logger: Logger = Logger(label: "weft.node"),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.logger = logger
        self.group = group
        self.channelConfiguration = ConnectionStateMachine.Configuration(
            identity: configuration.identity, meshKey: configuration.meshKey,
            displayName: configuration.displayName, policy: configuration.policy)
        (events, eventSink) = AsyncStream.makeStream(of: NodeEvent.self, bufferingPolicy: .unbounded)
    }

    public var identity: PublicIdentity { configuration.identity.publicKey }

    /// Identities of peers with an authenticated channel now.
    public var connectedPeers: [PublicIdentity] { state.withLock { Array($0.authenticated.keys) } }

    // MARK: - Service

    /// Starts, runs until graceful shutdown (SIGTERM/SIGINT through a `ServiceGroup`) or
    /// cancellation, then closes every connection with CLOSE(shutting down).
    public func run() async throws {
        _ = try await start()
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Binds the listener (if any) and starts dialing peers. Returns the bound address.
    @discardableResult
    public func start() async throws -> SocketAddress? {
        var bound: SocketAddress?
        if let listen = configuration.listenAddress {
            let listener = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { [self] channel in
                    channel.eventLoop.makeCompletedFuture { try self.install(on: channel, role: .responder) }
                }
                .bind(host: listen.host, port: listen.port).get()
            bound = listener.localAddress
            state.withLock { $0.listener = listener }
            logger.info("listening on \(bound.map(String.init(describing:)) ?? "?")")
            if let bound { eventSink.yield(.listening(bound)) }
        }
        for peer in configuration.peers {
            let dialer = Task { [self] in await self.keepDialing(peer) }
            state.withLock { $0.dialers.append(dialer) }
        }
        return bound
    }

    /// Closes every connection with CLOSE(shutting down), stops dialing and listening.
    public func shutdown() async {
        let (listener, channels, dialers) = state.withLock { state in
            state.stopping = true
            return (state.listener, Array(state.channels.values), state.dialers)
        }
        for dialer in dialers { dialer.cancel() }
        try? await listener?.close()
        for channel in channels {
            let request = PeerChannelHandler.CloseRequest(code: .shuttingDown, reason: "the node is shutting down")
            channel.triggerUserOutboundEvent(request, promise: nil)
        }
        for channel in channels { try? await channel.closeFuture.get() }
        for dialer in dialers { await dialer.value }
        eventSink.finish()
    }

    // MARK: - Sending

    /// Sends application bytes to an authenticated peer.
    public func send(_ bytes: ByteBuffer, to peer: PublicIdentity) async throws {
        guard let channel = state.withLock({ $0.authenticated[peer] }) else { throw PeerChannelError.unknownPeer(peer) }
        try await channel.writeAndFlush(bytes)
    }

    // MARK: - Connections

    private func keepDialing(_ peer: PeerAddress) async {
        var attempt = 0
        while !Task.isCancelled && !state.withLock({ $0.stopping }) {
            var wasAuthenticated = false
            do {
                let channel = try await ClientBootstrap(group: group)
                    .channelOption(.socketOption(.tcp_nodelay), value: 1)
                    .connectTimeout(.seconds(5))
                    .channelInitializer { [self] channel in
                        channel.eventLoop.makeCompletedFuture { try self.install(on: channel, role: .initiator) }
                    }
                    .connect(host: peer.host, port: peer.port).get()
                try? await channel.closeFuture.get()
                let id = ObjectIdentifier(channel)
                wasAuthenticated = state.withLock { $0.everAuthenticated.remove(id) != nil }
            } catch {
                logger.info("cannot reach \(peer): \(error)")
            }
            attempt = wasAuthenticated ? 0 : min(attempt + 1, configuration.redialDelays.count - 1)
            if Task.isCancelled || state.withLock({ $0.stopping }) { return }
            try? await Task.sleep(for: .nanoseconds(configuration.redialDelays[attempt].nanoseconds))
        }
    }

    /// Adds the secure-channel handler to a new connection and tracks the channel.
    private func install(on channel: any Channel, role: ConnectionStateMachine.Role) throws {
        let id = ObjectIdentifier(channel)
        let accepted = state.withLock { state in
            guard !state.stopping else { return false }
            state.channels[id] = channel
            return true
        }
        guard accepted else { throw ChannelError.ioOnClosedChannel }
        channel.closeFuture.whenComplete { [self] _ in
            state.withLock { state in
                state.channels[id] = nil
                state.authenticated = state.authenticated.filter { $0.value !== channel }
            }
        }
        let handler = PeerChannelHandler(
            role: role, configuration: channelConfiguration, tickInterval: configuration.tickInterval,
            logger: logger
        ) { [self] event in
            if case .peerAuthenticated(let peer, _, _) = event {
                state.withLock { state in
                    state.authenticated[peer.identity] = channel
                    state.everAuthenticated.insert(id)
                }
            }
            eventSink.yield(event)
        }
        try channel.pipeline.syncOperations.addHandler(handler)
    }
}
