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
        /// The feature bits told to peers (SPEC.md §3.3); none unless set. A node that sets
        /// `.names` must answer and send NAMES (the daemon does, through its `PeerDirectory`).
        public var features: NodeFeatures = []
        public var policy: ChannelPolicy
        /// How often each connection's timers are checked.
        public var tickInterval: TimeAmount
        /// Redial delays grow from the first to the last value.
        public var redialDelays: [TimeAmount]
        /// Told, for each authenticated peer that says it listens, where: the port it
        /// announced at the host it connected from, and the address this node dialed to reach
        /// it (nil for an inbound connection). The daemon remembers it across restarts.
        public var addressAnnounced: (@Sendable (_ user: PublicIdentity, _ address: PeerAddress, _ dialed: PeerAddress?) -> Void)?
        /// Where every connection writes the secrets that decrypt its traffic (SPEC.md §18),
        /// for `weft dump`; none by default (the daemon sets one only for `WEFT_KEYLOG`).
        public var keyLog: (any KeyLog)?

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
        /// Each authenticated peer's one connection (§5: one connection per pair of nodes).
        var sessions: [PublicIdentity: ConnectedPeer] = [:]
        /// Addresses the node keeps dialing, and the identity last seen answering each.
        var dialTargets: [PeerAddress: DialTarget] = [:]
        /// Peers whose connections are refused (a cut link).
        var blocked: Set<PublicIdentity> = []
        /// Starts dialers for targets added while running (nil before `run()` and after it).
        var dialRequests: AsyncStream<PeerAddress>.Continuation?
        /// The port the listener is bound to, told to peers in each handshake (§3.3).
        var listenPort: UInt16?
    }

    struct DialTarget {
        var how: ConnectedPeer.Origin
        var identity: PublicIdentity?
        /// Set by `heal` while the dialer is not waiting (it is dialing): its next wait ends
        /// at once.
        var wakeRequested = false
        /// The dialer's wait while it waits to redial: `heal` and `forget` resume it.
        var waiter: CheckedContinuation<Void, Never>?
        /// Whether a dialer has taken this target on: a second request for the address (it was
        /// forgotten and added again before the first dialer started) starts no second one.
        var claimed = false
        /// Tells this target from a later one at the same address, so that the dialer of a
        /// forgotten target ends even if the address is added again meanwhile.
        let serial = DialTarget.serials.add(1, ordering: .relaxed).newValue

        private static let serials = Atomic<UInt64>(0)
    }

    /// Dialers running now (tests watch them end).
    var dialerCount: Int { runningDialers.load(ordering: .relaxed) }
    /// Dialers waiting to redial now.
    var waitingDialerCount: Int { registry.withLock { $0.dialTargets.values.count { $0.waiter != nil } } }
    private let runningDialers = Atomic<Int>(0)

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
        var channelConfiguration = ConnectionStateMachine.Configuration(
            identity: configuration.identity, meshKey: configuration.meshKey,
            displayName: configuration.displayName, policy: configuration.policy)
        channelConfiguration.features = configuration.features
        channelConfiguration.keyLog = configuration.keyLog
        self.channelConfiguration = channelConfiguration
        let eventChannel = AsyncChannel<NodeEvent>()
        self.eventChannel = eventChannel
        self.events = NodeEvents(channel: eventChannel)
    }

    public var identity: PublicIdentity { configuration.identity.publicKey }

    /// Identities of peers with an authenticated connection now.
    public var connectedPeers: [PublicIdentity] { registry.withLock { Array($0.sessions.keys) } }

    /// Whether `peer` has an authenticated connection now.
    public func isConnected(_ peer: PublicIdentity) -> Bool { registry.withLock { $0.sessions[peer] != nil } }

    /// Each authenticated peer's connection: who, where, and how it was found.
    public var peers: [ConnectedPeer] { registry.withLock { Array($0.sessions.values) } }

    // MARK: - Links

    /// Dials `address` and keeps dialing it (as for `Configuration.peers`), from now on;
    /// `expecting` is the peer last found there, if the node remembers it (so that, should
    /// that peer announce another address, the dialing moves there).
    public func connect(to address: PeerAddress, how: ConnectedPeer.Origin = .added, expecting: PublicIdentity? = nil) {
        let request = registry.withLock { registry -> AsyncStream<PeerAddress>.Continuation? in
            guard registry.dialTargets[address] == nil else { return nil }
            var target = DialTarget(how: how)
            target.identity = expecting
            registry.dialTargets[address] = target
            return registry.dialRequests
        }
        request?.yield(address)
    }

    /// Stops dialing `address` (an open connection stays): a dialer waiting to redial ends at
    /// once, one dialing ends when that attempt or connection does. With `origin`, only if it
    /// was added that way (discovery forgets what it found, never a configured peer).
    public func forget(_ address: PeerAddress, ifFoundAs origin: ConnectedPeer.Origin? = nil) {
        let waiter = registry.withLock { registry -> CheckedContinuation<Void, Never>? in
            guard let target = registry.dialTargets[address], origin == nil || target.how == origin else { return nil }
            registry.dialTargets[address] = nil
            return target.waiter
        }
        waiter?.resume()
    }

    /// Stops dialing `address` and closes the connection with the peer last found there, if it
    /// is connected (with CLOSE, normal); returns that peer. A peer that dials this node is
    /// still accepted (`cut` refuses it).
    @discardableResult
    public func disconnect(from address: PeerAddress) -> PublicIdentity? {
        let identity = registry.withLock { $0.dialTargets[address]?.identity }
        forget(address)
        if let identity { close(identity, reason: "the link was disconnected by this node's user") }
        return identity
    }

    /// Cuts the link to `peer`: closes its connection with CLOSE 4 and refuses it until
    /// `heal(_:)`.
    public func cut(_ peer: PublicIdentity) {
        let channel = registry.withLock { registry in
            registry.blocked.insert(peer)
            return registry.sessions[peer]?.channel
        }
        channel?.triggerUserOutboundEvent(
            PeerChannelHandler.CloseRequest(code: .linkCut, reason: "the link to this node was cut"), promise: nil)
    }

    /// Heals a cut link: the peer is accepted again, and dialers of its address dial now.
    public func heal(_ peer: PublicIdentity) {
        let waiters = registry.withLock { registry -> [CheckedContinuation<Void, Never>] in
            registry.blocked.remove(peer)
            var waiters: [CheckedContinuation<Void, Never>] = []
            for (address, target) in registry.dialTargets where target.identity == peer || target.identity == nil {
                if let waiter = target.waiter {
                    waiters.append(waiter)
                    registry.dialTargets[address]?.waiter = nil
                } else {
                    registry.dialTargets[address]?.wakeRequested = true
                }
            }
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Closes the connection with `peer`, if any, with CLOSE `code` (a protocol error found
    /// above the channel, for example).
    public func close(_ peer: PublicIdentity, code: CloseCode = .normal, reason: String) {
        let channel = registry.withLock { $0.sessions[peer]?.channel }
        channel?.triggerUserOutboundEvent(PeerChannelHandler.CloseRequest(code: code, reason: reason), promise: nil)
    }

    /// Closes the connection with `peer` with ERROR `code` (bad input seen above the channel).
    public func fail(_ peer: PublicIdentity, code: ErrorCode, reason: String) {
        let channel = registry.withLock { $0.sessions[peer]?.channel }
        channel?.triggerUserOutboundEvent(PeerChannelHandler.ErrorRequest(code: code, reason: reason), promise: nil)
    }

    /// Closes `connection` (only that one, not a newer one of its peer) with ERROR `code`.
    public func fail(_ connection: PeerConnection, code: ErrorCode, reason: String) {
        connection.channel.triggerUserOutboundEvent(PeerChannelHandler.ErrorRequest(code: code, reason: reason), promise: nil)
    }

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
        let (dialRequests, requestContinuation) = AsyncStream<PeerAddress>.makeStream()
        let initialTargets = registry.withLock { registry in
            registry.dialRequests = requestContinuation
            for peer in configuration.peers where registry.dialTargets[peer] == nil {
                registry.dialTargets[peer] = DialTarget(how: .configured)
            }
            return Array(registry.dialTargets.keys)
        }
        for target in initialTargets { requestContinuation.yield(target) }
        defer {
            requestContinuation.finish()
            registry.withLock { $0.dialRequests = nil }
        }
        try await withThrowingDiscardingTaskGroup { group in
            // Dialers start once the listener is bound, so that every handshake tells the
            // peer the port this node listens on (§3.3).
            func startDialers() {
                group.addTask {
                    await withDiscardingTaskGroup { dialers in
                        for await address in dialRequests {
                            dialers.addTask { await self.keepDialing(address) }
                        }
                    }
                }
            }
            guard let listen = configuration.listenAddress else { return startDialers() }
            let listener: NIOAsyncChannel<NIOAsyncChannel<PeerChannelEvent, ByteBuffer>, Never>
            do {
                listener = try await ServerBootstrap(group: self.group)
                    .serverChannelOption(.backlog, value: 256)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                    .childChannelOption(.writeBufferWaterMark, value: Self.writeBufferWaterMark)
                    .bind(host: listen.host, port: listen.port) { channel in
                        channel.eventLoop.makeCompletedFuture { try self.connection(on: channel, role: .responder) }
                    }
            } catch {
                throw ListenError(address: listen, underlying: error)
            }
            if let address = listener.channel.localAddress {
                registry.withLock { $0.listenPort = address.port.flatMap { UInt16(exactly: $0) } }
                logger.info("listening on \(address)")
                group.addTask { await self.report(.listening(address)) }
            }
            startDialers()
            try await listener.executeThenClose { connections in
                for try await connection in connections {
                    group.addTask {
                        _ = await PeerSession(connection: connection, direction: .inbound, origin: .inbound, dialed: nil, node: self).run()
                    }
                }
            }
        }
    }

    /// Dials `peer` until it is forgotten or the node stops: after a connection ends, or an
    /// attempt fails, waits a delay that grows with each failure (`redialDelays`, with ±25 %
    /// jitter so nodes restarted together do not dial in step), and starts again at the first
    /// delay after a connection that authenticated. While the identity last seen at the
    /// address is connected (over another connection) or cut, it does not dial.
    private func keepDialing(_ peer: PeerAddress) async {
        let claim = registry.withLock { registry -> UInt64? in
            guard let target = registry.dialTargets[peer], !target.claimed else { return nil }
            registry.dialTargets[peer]?.claimed = true
            return target.serial
        }
        guard let serial = claim else { return }
        runningDialers.add(1, ordering: .relaxed)
        defer { runningDialers.subtract(1, ordering: .relaxed) }
        var attempt = 0
        while !Task.isCancelled {
            guard let target = registry.withLock({ $0.dialTargets[peer] }), target.serial == serial else { return }
            var wasAuthenticated = false
            if let known = target.identity, isConnectedOrCut(known) {
                // Nothing to do until the link heals or the other connection ends.
            } else {
                do {
                    let connection = try await ClientBootstrap(group: group)
                        .channelOption(.socketOption(.tcp_nodelay), value: 1)
                        .channelOption(.writeBufferWaterMark, value: Self.writeBufferWaterMark)
                        .connectTimeout(.seconds(5))
                        .connect(host: peer.host, port: peer.port) { channel in
                            channel.eventLoop.makeCompletedFuture { try self.connection(on: channel, role: .initiator) }
                        }
                    wasAuthenticated = await PeerSession(
                        connection: connection, direction: .outbound, origin: target.how, dialed: peer, node: self
                    ).run()
                } catch {
                    logger.info("cannot reach \(peer): \(error)")
                }
            }
            attempt = wasAuthenticated ? 0 : min(attempt + 1, configuration.redialDelays.count - 1)
            let delay = configuration.redialDelays[attempt].nanoseconds
            await waitToRedial(peer, serial: serial, nanoseconds: delay + Int64.random(in: -delay / 4...delay / 4))
        }
    }

    private func isConnectedOrCut(_ peer: PublicIdentity) -> Bool {
        registry.withLock { $0.blocked.contains(peer) || $0.sessions[peer] != nil }
    }

    /// Waits until the delay passes, the link is healed (`heal`), the address is forgotten
    /// (`forget`), or the node stops (cancellation), whichever comes first, without polling:
    /// one child task sleeps, the other waits on a continuation that `heal` and `forget`
    /// resume; the first to end cancels the other.
    private func waitToRedial(_ peer: PeerAddress, serial: UInt64, nanoseconds: Int64) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: .nanoseconds(nanoseconds)) }
            group.addTask { await self.wake(peer, serial: serial) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns once `heal` or `forget` resumes the dialer of target `serial` at `peer` (at
    /// once if `heal` asked while it was dialing, or the target is gone), or the task is
    /// cancelled. The continuation is stored, taken and resumed under the registry's lock, so
    /// it is resumed exactly once whoever comes first.
    private func wake(_ peer: PeerAddress, serial: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let waits = registry.withLock { registry -> Bool in
                    guard !Task.isCancelled, let target = registry.dialTargets[peer], target.serial == serial else { return false }
                    if target.wakeRequested {
                        registry.dialTargets[peer]?.wakeRequested = false
                        return false
                    }
                    registry.dialTargets[peer]?.waiter = continuation
                    return true
                }
                if !waits { continuation.resume() }
            }
        } onCancel: {
            let waiter = registry.withLock { registry -> CheckedContinuation<Void, Never>? in
                guard let target = registry.dialTargets[peer], target.serial == serial else { return nil }
                registry.dialTargets[peer]?.waiter = nil
                return target.waiter
            }
            waiter?.resume()
        }
    }

    /// Sets up a new connection on its event loop: the protocol handler, then the async
    /// channel its session reads and writes through.
    private func connection(
        on channel: any Channel, role: ConnectionStateMachine.Role
    ) throws -> NIOAsyncChannel<PeerChannelEvent, ByteBuffer> {
        let id = ObjectIdentifier(channel)
        let listenPort = registry.withLock { registry -> UInt16?? in
            guard !registry.stopped else { return nil }
            registry.channels[id] = channel
            return .some(registry.listenPort)
        }
        guard let listenPort else { throw ChannelError.ioOnClosedChannel }
        var channelConfiguration = self.channelConfiguration
        channelConfiguration.listenPort = listenPort
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

    /// Registers an authenticated connection. Returns false, after asking the channel to close,
    /// when the connection is refused: the peer's link is cut, or the peer already has a
    /// connection that the rule of §5 keeps instead (the other one is closed then).
    func sessionAuthenticated(_ session: ConnectedPeer) -> Bool {
        let peer = session.info.identity
        let announced = session.announcedAddress
        let (keep, drop, moved) = registry.withLock { registry -> (Bool, (any Channel)?, PeerAddress?) in
            if let dialed = session.dialed { registry.dialTargets[dialed]?.identity = peer }
            let moved = announced.flatMap { Self.redirect(&registry, peer: peer, to: $0) }
            if registry.blocked.contains(peer) { return (false, nil, moved) }
            guard let existing = registry.sessions[peer] else {
                registry.sessions[peer] = session
                return (true, nil, moved)
            }
            if Self.prefer(session, over: existing, localIdentity: identity) {
                registry.sessions[peer] = session
                return (true, existing.channel, moved)
            }
            return (false, nil, moved)
        }
        if let announced {
            if let moved { logger.info("\(session.info.displayName) now listens at \(announced); dialing it there instead of \(moved)") }
            configuration.addressAnnounced?(peer, announced, session.dialed)
        }
        if let drop {
            drop.triggerUserOutboundEvent(
                PeerChannelHandler.CloseRequest(code: .duplicateConnection, reason: "already connected over another connection"),
                promise: nil)
        }
        if !keep {
            let cut = registry.withLock { $0.blocked.contains(peer) }
            let request = cut
                ? PeerChannelHandler.CloseRequest(code: .linkCut, reason: "the link to this node was cut")
                : PeerChannelHandler.CloseRequest(code: .duplicateConnection, reason: "already connected over another connection")
            session.channel.triggerUserOutboundEvent(request, promise: nil)
        }
        return keep
    }

    /// Moves the dialing of `peer` to the address it announced, when this node dials it (as a
    /// configured or added peer) at a port it no longer listens on: the node restarted on a
    /// new port. Returns the address no longer dialed. Discovered addresses are discovery's
    /// to manage; an address on the same port (a host name for the same node) is kept.
    private static func redirect(_ registry: inout Registry, peer: PublicIdentity, to announced: PeerAddress) -> PeerAddress? {
        guard registry.dialTargets[announced] == nil,
            let (old, target) = registry.dialTargets.first(where: { $0.value.identity == peer && $0.value.how != .discovered }),
            old.port != announced.port
        else { return nil }
        registry.dialTargets[old] = nil
        target.waiter?.resume()
        var moved = DialTarget(how: target.how)
        moved.identity = peer
        registry.dialTargets[announced] = moved
        registry.dialRequests?.yield(announced)
        return old
    }

    /// §5: of two connections with one peer, keep the one whose initiator has the lesser
    /// identity key; of two with the same initiator, the newer (`candidate`).
    static func prefer(_ candidate: ConnectedPeer, over existing: ConnectedPeer, localIdentity: PublicIdentity) -> Bool {
        func initiator(_ session: ConnectedPeer) -> [UInt8] {
            session.direction == .outbound ? localIdentity.bytes : session.info.identity.bytes
        }
        let (new, old) = (initiator(candidate), initiator(existing))
        return new == old || new.lexicographicallyPrecedes(old)
    }

    /// Unregisters a connection that ended. Returns whether it was its peer's connection (not
    /// one refused or replaced by another).
    @discardableResult
    func sessionEnded(channel: any Channel) -> Bool {
        registry.withLock { registry in
            guard let peer = registry.sessions.first(where: { $0.value.channel === channel })?.key else { return false }
            registry.sessions[peer] = nil
            return true
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
        guard let channel = registry.withLock({ $0.sessions[peer]?.channel }) else { throw .unknownPeer(peer) }
        try await write(bytes, to: channel)
    }

    /// Sends application bytes as one DATA frame on `connection` only, as `send(_:to:)` does:
    /// never on a newer connection of the same peer. What belongs to one connection (a
    /// compressed stream, §14.11) is written this way, so a reconnect starts afresh.
    /// - Throws: `.payloadTooLarge`, or `.connectionClosed` once that connection has closed.
    public func send(_ bytes: ByteBuffer, on connection: PeerConnection) async throws(PeerChannelError) {
        guard bytes.readableBytes <= WireConstants.maxDataPayloadByteCount else {
            throw .payloadTooLarge(bytes.readableBytes)
        }
        try await write(bytes, to: connection.channel)
    }

    private func write(_ bytes: ByteBuffer, to channel: any Channel) async throws(PeerChannelError) {
        do {
            try await channel.writeAndFlush(bytes).get()
        } catch let error as PeerChannelError {
            throw error
        } catch {
            throw .connectionClosed
        }
    }
}

/// Why a node could not listen on its address, in one sentence that says what to do.
public struct ListenError: Error, CustomStringConvertible {
    public let address: PeerAddress
    public let underlying: any Error

    public var description: String {
        if let error = underlying as? IOError {
            switch error.errnoCode {
            case EADDRINUSE:
                return "Cannot listen on \(address): the port is in use (by another node or program); choose another with --listen HOST:PORT, or port 0 for a free one."
            case EADDRNOTAVAIL:
                return "Cannot listen on \(address): \(address.host) is not an address of this machine."
            case EACCES:
                return "Cannot listen on \(address): ports below 1024 need root; choose a higher port."
            default:
                return "Cannot listen on \(address): \(String(cString: strerror(error.errnoCode)))."
            }
        }
        if underlying is SocketAddressError.UnknownHost || underlying is SocketAddressError {
            return "Cannot listen on \(address): there is no host \(address.host) (give an IP address, or a name this machine resolves)."
        }
        return "Cannot listen on \(address): \(underlying)."
    }
}
