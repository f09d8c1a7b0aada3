import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import WeftCrypto
import WeftNode
import WeftStore
import WeftWire

/// Records a node's events so tests can wait for one with a deadline. While paused it takes
/// no events, so the node's sessions wait (the events' back-pressure).
final class EventRecorder: Sendable {
    private final class Storage: Sendable {
        let events = Mutex<[NodeEvent]>([])
        let paused = Mutex(false)
    }

    private let storage = Storage()
    private let consumer: Task<Void, Never>

    init(_ node: MeshNode) {
        let storage = self.storage
        consumer = Task {
            var events = node.events.makeAsyncIterator()
            while true {
                while storage.paused.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(10)) }
                guard let event = await events.next() else { return }
                storage.events.withLock { $0.append(event) }
            }
        }
    }

    deinit { consumer.cancel() }

    var all: [NodeEvent] { storage.events.withLock { $0 } }

    /// Stops taking events (after the one it may be waiting for).
    func pause() { storage.paused.withLock { $0 = true } }
    func resume() { storage.paused.withLock { $0 = false } }

    /// The first recorded event `match` accepts, waiting up to `seconds`.
    /// (60 s: a deadline against hangs, met at once when all is well. In the full test run,
    /// CPU-bound suites can hold both cooperative threads of this 2-core machine for seconds,
    /// and the node's tasks wait for them; 10 s was too short then.)
    func first<T>(within seconds: Double = 60, _ match: (NodeEvent) -> T?) async throws -> T {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let found = all.lazy.compactMap(match).first { return found }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("no matching event within \(seconds) s; saw: \(all)")
        throw CancellationError()
    }

    func count<T>(_ match: (NodeEvent) -> T?) -> Int { all.compactMap(match).count }
}

/// A node running in a task of its own, with its events recorded. `stop()` cancels the task,
/// which is how a node is told to stop (as a `ServiceGroup` does on SIGTERM).
final class RunningNode: Sendable {
    let node: MeshNode
    let events: EventRecorder
    private let task: Task<Void, any Error>

    init(_ node: MeshNode) {
        self.node = node
        events = EventRecorder(node)
        task = Task { try await node.run() }
    }

    var identity: PublicIdentity { node.identity }
    var connectedPeers: [PublicIdentity] { node.connectedPeers }

    func send(_ bytes: ByteBuffer, to peer: PublicIdentity) async throws {
        try await node.send(bytes, to: peer)
    }

    /// The listener's address, once bound.
    func address() async throws -> SocketAddress { try await events.first(Match.listening) }

    /// Stops the node and waits until `run()` returned; rethrows what it threw.
    func stop() async throws {
        task.cancel()
        try await task.value
    }
}

/// Starts a node; `address()` then waits for its listener.
func startNode(
    _ name: String, meshKey: MeshKey, peers: [PeerAddress] = [], policy: ChannelPolicy = testPolicy,
    listenAddress: PeerAddress? = PeerAddress(host: "127.0.0.1", port: 0), redialDelays: [TimeAmount] = testRedialDelays
) throws -> RunningNode {
    RunningNode(try makeNode(name, meshKey: meshKey, peers: peers, policy: policy, listenAddress: listenAddress, redialDelays: redialDelays))
}

/// Matchers for the events the tests wait on.
enum Match {
    static func listening(_ event: NodeEvent) -> SocketAddress? {
        if case .listening(let address) = event { address } else { nil }
    }
    static func authenticated(_ event: NodeEvent) -> NodeInfo? {
        if case .peerAuthenticated(let info, _, _, _) = event { info } else { nil }
    }
    static func ended(_ event: NodeEvent) -> ConnectionEnd? {
        if case .connectionEnded(_, _, let end, _) = event { end } else { nil }
    }
    static func endedBeforeAuthentication(_ event: NodeEvent) -> ConnectionEnd? {
        if case .connectionEnded(nil, _, let end, _) = event { end } else { nil }
    }
    static func dataBytes(_ event: NodeEvent) -> ByteBuffer? {
        if case .data(_, let bytes) = event { bytes } else { nil }
    }
    static func data(_ event: NodeEvent) -> String? {
        if case .data(_, let bytes) = event { String(buffer: bytes) } else { nil }
    }
    static func pong(_ event: NodeEvent) -> TimeAmount? {
        if case .pong(_, let rtt) = event { rtt } else { nil }
    }
}

/// Fast timings so tests don't wait for production keepalives.
let testPolicy = ChannelPolicy(pingInterval: .milliseconds(200), idleTimeout: .seconds(5), handshakeTimeout: .seconds(5))

/// A logger that prints only what would crash a test run.
func quietLogger(_ name: String) -> Logger {
    var logger = Logger(label: "test.\(name)")
    logger.logLevel = .critical
    return logger
}

/// Short redial delays, so tests don't wait out production backoff.
let testRedialDelays: [TimeAmount] = [.milliseconds(50), .milliseconds(200)]

func makeNode(
    _ name: String, meshKey: MeshKey, peers: [PeerAddress] = [], policy: ChannelPolicy = testPolicy,
    listenAddress: PeerAddress? = PeerAddress(host: "127.0.0.1", port: 0), redialDelays: [TimeAmount] = testRedialDelays
) throws -> MeshNode {
    let logger = quietLogger(name)
    let identity = NodeIdentity.generate()
    return MeshNode(
        configuration: .init(
            identity: identity, meshKey: meshKey, displayName: name, listenAddress: listenAddress, peers: peers,
            policy: policy, tickInterval: .milliseconds(50), redialDelays: redialDelays),
        store: try Store(directory: nil, localUser: identity.publicKey),
        logger: logger)
}

extension SocketAddress {
    var peerAddress: PeerAddress { PeerAddress(host: ipAddress!, port: port!) }
}

/// A hand-driven peer on a raw loopback socket: it runs its own `ConnectionStateMachine`, so a
/// test can complete a real handshake and then misbehave in exact ways.
struct RawPeer {
    let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>

    static func connect(to address: SocketAddress) async throws -> RawPeer {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: address.ipAddress!, port: address.port!) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return RawPeer(channel: channel)
    }

    /// Runs `body` with the raw streams, then closes the socket.
    func run<R: Sendable>(
        _ body: (NIOAsyncChannelInboundStream<ByteBuffer>, NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws -> R
    ) async throws -> R {
        try await channel.executeThenClose { inbound, outbound in try await body(inbound, outbound) }
    }
}

/// Drives `machine` over raw streams until `stop` says so or the stream ends; returns the
/// actions seen (writes excluded). `ConnectionStateMachine` writes go to `outbound`.
func drive(
    _ machine: inout ConnectionStateMachine, _ initial: [ConnectionAction],
    inbound: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
    outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
    until stop: (ConnectionAction) -> Bool
) async throws -> [ConnectionAction] {
    var seen: [ConnectionAction] = []
    var pending = initial
    while true {
        // Every write of a batch goes out, even after the action that stops: the machine
        // already sealed it, and a skipped record would desynchronise the nonces.
        var stopped = false
        for action in pending {
            if case .write(let bytes) = action { try await outbound.write(bytes) } else if !stopped { seen.append(action) }
            if stop(action) { stopped = true }
        }
        if stopped { return seen }
        guard let bytes = try await inbound.next() else { return seen }
        pending = machine.receive(bytes, now: .now())
    }
}

/// Connects a raw peer to `address`, completes a real handshake as initiator, then runs `body`
/// with the machine and the raw streams; the socket closes afterwards.
func withAuthenticatedRawPeer<R: Sendable>(
    at address: SocketAddress, meshKey: MeshKey, policy: ChannelPolicy = testPolicy,
    _ body: (inout ConnectionStateMachine, inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws -> R
) async throws -> R {
    let raw = try await RawPeer.connect(to: address)
    return try await raw.run { inbound, outbound in
        var machine = ConnectionStateMachine(
            role: .initiator,
            configuration: .init(identity: .generate(), meshKey: meshKey, displayName: "raw", policy: policy))
        var iterator = inbound.makeAsyncIterator()
        let handshake = try await drive(&machine, machine.start(now: .now()), inbound: &iterator, outbound: outbound) {
            if case .authenticated = $0 { true } else { false }
        }
        #expect(handshake.contains { if case .authenticated = $0 { true } else { false } })
        return try await body(&machine, &iterator, outbound)
    }
}
