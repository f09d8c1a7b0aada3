import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import WeftCrypto
import WeftNode
import WeftWire

/// Records a node's events so tests can wait for one with a deadline.
final class EventRecorder: Sendable {
    private final class Storage: Sendable {
        let events = Mutex<[NodeEvent]>([])
    }

    private let storage = Storage()
    private let consumer: Task<Void, Never>

    init(_ node: MeshNode) {
        let storage = self.storage
        consumer = Task { for await event in node.events { storage.events.withLock { $0.append(event) } } }
    }

    deinit { consumer.cancel() }

    var all: [NodeEvent] { storage.events.withLock { $0 } }

    /// The first recorded event `match` accepts, waiting up to `seconds`.
    func first<T>(within seconds: Double = 10, _ match: (NodeEvent) -> T?) async throws -> T {
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

/// Matchers for the events the tests wait on.
enum Match {
    static func authenticated(_ event: NodeEvent) -> NodeInfo? {
        if case .peerAuthenticated(let info, _, _) = event { info } else { nil }
    }
    static func ended(_ event: NodeEvent) -> ConnectionEnd? {
        if case .connectionEnded(_, _, let end) = event { end } else { nil }
    }
    static func endedBeforeAuthentication(_ event: NodeEvent) -> ConnectionEnd? {
        if case .connectionEnded(nil, _, let end) = event { end } else { nil }
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

func makeNode(
    _ name: String, meshKey: MeshKey, peers: [PeerAddress] = [], policy: ChannelPolicy = testPolicy
) -> MeshNode {
    var logger = Logger(label: "test.\(name)")
    logger.logLevel = .critical
    return MeshNode(
        configuration: .init(
            identity: .generate(), meshKey: meshKey, displayName: name, peers: peers, policy: policy,
            tickInterval: .milliseconds(50), redialDelays: [.milliseconds(50), .milliseconds(200)]),
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
        for action in pending {
            if case .write(let bytes) = action { try await outbound.write(bytes) } else { seen.append(action) }
            if stop(action) { return seen }
        }
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
