import Logging
import NIOCore
import WeftCrypto
import WeftWire

/// The I/O edge of one connection: feeds bytes and clock ticks to `ConnectionStateMachine` and
/// carries out its actions on the channel. All protocol decisions live in the state machine.
///
/// Outbound, the handler takes application bytes (`ByteBuffer`) and writes them as DATA frames;
/// a write before the handshake completes fails with `PeerChannelError.notEstablished`.
final class PeerChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = Never
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Asks the handler to close with a CLOSE frame carrying this code and reason.
    struct CloseRequest: Sendable {
        var code: CloseCode
        var reason: String
    }

    private var machine: ConnectionStateMachine
    private let direction: ConnectionDirection
    private let tickInterval: TimeAmount
    private var logger: Logger
    private let report: @Sendable (NodeEvent) -> Void
    private var remoteAddress: SocketAddress?
    /// Kept after the machine closes, so the end of a session names its peer.
    private var authenticatedPeer: NodeInfo?
    private var tickTask: RepeatedTask?

    init(
        role: ConnectionStateMachine.Role, configuration: ConnectionStateMachine.Configuration,
        tickInterval: TimeAmount, logger: Logger, report: @escaping @Sendable (NodeEvent) -> Void
    ) {
        self.machine = ConnectionStateMachine(role: role, configuration: configuration)
        self.direction = role == .initiator ? .outbound : .inbound
        self.tickInterval = tickInterval
        self.logger = logger
        self.report = report
    }

    // MARK: - Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { begin(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        begin(context: context)
        context.fireChannelActive()
    }

    private func begin(context: ChannelHandlerContext) {
        guard tickTask == nil else { return }
        remoteAddress = context.remoteAddress
        logger[metadataKey: "peer-address"] = "\(remoteAddress.map(String.init(describing:)) ?? "?")"
        logger[metadataKey: "direction"] = "\(direction.rawValue)"
        // The task runs on this channel's event loop, so handler and context stay on it.
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        tickTask = context.eventLoop.scheduleRepeatedTask(initialDelay: tickInterval, delay: tickInterval) { _ in
            let (handler, context) = bound.value
            handler.perform(handler.machine.tick(now: .now()), context: context)
        }
        perform(machine.start(now: .now()), context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
        if let end = machine.connectionClosed() { ended(end) }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        tickTask?.cancel()
        tickTask = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.warning("connection error: \(error)")
        context.close(promise: nil)
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(machine.receive(unwrapInboundIn(data), now: .now()), context: context)
    }

    // MARK: - Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard machine.isEstablished else {
            promise?.fail(PeerChannelError.notEstablished)
            return
        }
        perform(machine.send(data: unwrapOutboundIn(data), now: .now()), context: context, writePromise: promise)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let request = event as? CloseRequest else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        perform(machine.close(request.code, reason: request.reason, now: .now()), context: context)
        promise?.succeed()
    }

    // MARK: - Actions

    private func perform(
        _ actions: [ConnectionAction], context: ChannelHandlerContext, writePromise: EventLoopPromise<Void>? = nil
    ) {
        var writePromise = writePromise
        for action in actions {
            switch action {
            case .write(let bytes):
                context.writeAndFlush(wrapOutboundOut(bytes), promise: writePromise)
                writePromise = nil
            case .authenticated(let peer):
                authenticatedPeer = peer
                logger[metadataKey: "peer"] = "\(peer.identity)"
                logger.info("peer authenticated: \(peer.identity) (\(peer.displayName))")
                report(.peerAuthenticated(peer, address: remoteAddress, direction: direction))
            case .data(let bytes):
                if let peer = machine.peer { report(.data(peer.identity, bytes)) }
            case .pong(let roundTrip):
                if let peer = machine.peer {
                    logger.debug("pong after \(Double(roundTrip.nanoseconds) / 1e6) ms")
                    report(.pong(peer.identity, roundTrip: roundTrip))
                }
            case .close(let end):
                ended(end)
                context.close(promise: nil)
            }
        }
        writePromise?.succeed()
    }

    private func ended(_ end: ConnectionEnd) {
        switch end.kind {
        case .localClose, .peerClosed:
            logger.info("connection closed: \(end)")
        default:
            logger.warning("connection closed: \(end)")
        }
        report(.connectionEnded(peer: authenticatedPeer, address: remoteAddress, end))
    }
}

/// Misuse of a peer channel by the node.
public enum PeerChannelError: Error, Sendable, CustomStringConvertible {
    case notEstablished
    case unknownPeer(PublicIdentity)

    public var description: String {
        switch self {
        case .notEstablished: "the secure channel is not established yet"
        case .unknownPeer(let peer): "no authenticated connection to \(peer)"
        }
    }
}
