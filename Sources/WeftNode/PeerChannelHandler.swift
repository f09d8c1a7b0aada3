import Logging
import NIOCore
import WeftCrypto
import WeftWire

/// What a connection's handler passes up the pipeline to its `PeerSession`, in order.
enum PeerChannelEvent: Sendable {
    /// The handshake finished and the peer proved this identity.
    case authenticated(NodeInfo)
    /// The payload of a DATA frame.
    case data(ByteBuffer)
    /// A keepalive round trip completed.
    case pong(roundTrip: TimeAmount)
    /// The connection ended (the last event; the channel closes after it).
    case ended(ConnectionEnd)
}

/// The protocol edge of one connection, on its event loop: feeds bytes and clock ticks to
/// `ConnectionStateMachine` and carries out its actions. All protocol decisions live in the
/// state machine; the application side (`PeerSession`) sits above, behind an `NIOAsyncChannel`.
///
/// Inbound, socket bytes become `PeerChannelEvent`s. Outbound, application bytes
/// (`ByteBuffer`) become DATA frames; a write fails its promise, rather than being dropped,
/// when the channel is not established, is closed, or the payload is over the frame limit.
///
/// Closing always ends with the protocol's last word: the channel closes only once the final
/// CLOSE or ERROR frame is written (SPEC.md §1 "close the connection"), whether the machine
/// decided to close or the node asked (`CloseRequest`, or `close()` from above, which sends
/// CLOSE(normal)). A final write that does not complete within `finalWriteTimeout` (a peer
/// that stopped reading) is abandoned and the channel closed anyway.
final class PeerChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = PeerChannelEvent
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Asks the handler to close with a CLOSE frame carrying this code and reason.
    struct CloseRequest: Sendable {
        var code: CloseCode
        var reason: String
    }

    /// Asks the handler to send ERROR and close: the node found the peer's input bad.
    struct ErrorRequest: Sendable {
        var code: ErrorCode
        var reason: String
    }

    /// How long the last frame may take to leave before the channel is closed without it.
    static let finalWriteTimeout: TimeAmount = .seconds(5)

    private var machine: ConnectionStateMachine
    private let direction: ConnectionDirection
    private let tickInterval: TimeAmount
    private var logger: Logger
    private var tickTask: RepeatedTask?
    /// Set once the machine has closed and the close waits for the final frame's write.
    private var finalWriteDeadline: Scheduled<Void>?
    /// The end the machine decided and the layer above has not been told yet. Set before the
    /// actions that carry it run: the final frame's write can fail at once (the peer closed
    /// first) and close the channel re-entrantly, and channelInactive must then tell the end,
    /// before the async channel above finishes its stream.
    private var untoldEnd: ConnectionEnd?

    init(
        role: ConnectionStateMachine.Role, configuration: ConnectionStateMachine.Configuration,
        tickInterval: TimeAmount, logger: Logger
    ) {
        self.machine = ConnectionStateMachine(role: role, configuration: configuration)
        self.direction = role == .initiator ? .outbound : .inbound
        self.tickInterval = tickInterval
        self.logger = logger
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
        logger[metadataKey: "peer-address"] = "\(context.remoteAddress.map(String.init(describing:)) ?? "?")"
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
        stopTimers()
        let wasHandshaking = machine.isHandshaking
        if let end = machine.connectionClosed() {
            ended(end, context: context, hungUpMidHandshake: wasHandshaking)
        } else if let end = untoldEnd {
            ended(end, context: context)
        }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopTimers()
    }

    private func stopTimers() {
        tickTask?.cancel()
        tickTask = nil
        finalWriteDeadline?.cancel()
        finalWriteDeadline = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A socket error: nothing more can be written, so close at once (channelInactive
        // reports the end).
        logger.warning("connection error: \(error)")
        context.close(promise: nil)
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        perform(machine.receive(unwrapInboundIn(data), now: .now()), context: context)
    }

    // MARK: - Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let bytes = unwrapOutboundIn(data)
        guard machine.isEstablished else {
            promise?.fail(machine.isClosed ? PeerChannelError.connectionClosed : PeerChannelError.notEstablished)
            return
        }
        guard bytes.readableBytes <= WireConstants.maxDataPayloadByteCount else {
            promise?.fail(PeerChannelError.payloadTooLarge(bytes.readableBytes))
            return
        }
        let actions = machine.send(data: bytes, now: .now())
        // A send that ends the connection (the sending cipher ran out) did not write the data,
        // even if a REKEY went out first.
        let closed = actions.contains { if case .close = $0 { true } else { false } }
        perform(actions, context: context, writePromise: closed ? nil : promise)
        if closed { promise?.fail(PeerChannelError.connectionClosed) }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if let request = event as? CloseRequest {
            perform(machine.close(request.code, reason: request.reason, now: .now()), context: context)
            promise?.succeed()
        } else if let request = event as? ErrorRequest {
            perform(machine.fail(request.code, reason: request.reason, now: .now()), context: context)
            promise?.succeed()
        } else {
            context.triggerUserOutboundEvent(event, promise: promise)
        }
    }

    /// A close from above (the session ending, the node stopping) says goodbye first.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all else {
            context.close(mode: mode, promise: promise)
            return
        }
        if !machine.isClosed {
            // Closes now, or once the CLOSE frame is written.
            perform(machine.close(.normal, reason: "the node closed the connection", now: .now()), context: context)
        } else if finalWriteDeadline == nil {
            // Already ended with nothing left to write (closing twice is harmless).
            context.close(promise: nil)
        }
        if let promise { context.channel.closeFuture.cascade(to: promise) }
    }

    // MARK: - Actions

    private func perform(
        _ actions: [ConnectionAction], context: ChannelHandlerContext, writePromise: EventLoopPromise<Void>? = nil
    ) {
        var writePromise = writePromise
        var lastWrite: EventLoopFuture<Void>?
        var passedUp = false
        for action in actions { if case .close(let end) = action { untoldEnd = end } }
        for action in actions {
            switch action {
            case .write(let bytes):
                let written = context.writeAndFlush(wrapOutboundOut(bytes))
                if let promise = writePromise {
                    written.cascade(to: promise)
                    writePromise = nil
                }
                lastWrite = written
            case .authenticated(let peer):
                logger[metadataKey: "peer"] = "\(peer.identity)"
                logger.info("peer authenticated: \(peer.identity) (\(peer.displayName))")
                context.fireChannelRead(wrapInboundOut(.authenticated(peer)))
                passedUp = true
            case .data(let bytes):
                context.fireChannelRead(wrapInboundOut(.data(bytes)))
                passedUp = true
            case .pong(let roundTrip):
                logger.debug("pong after \(Double(roundTrip.nanoseconds) / 1e6) ms")
                context.fireChannelRead(wrapInboundOut(.pong(roundTrip: roundTrip)))
                passedUp = true
            case .close(let end):
                // Told already if the final write closed the channel on the way here.
                if untoldEnd != nil { ended(end, context: context) }
                passedUp = false  // ended() completed the read batch
                close(after: lastWrite, context: context)
            }
        }
        // The async channel above hands reads to its consumer at read-complete; events that did
        // not come from a socket read (a tick's pong) need one too.
        if passedUp { context.fireChannelReadComplete() }
        // The machine wrote nothing for this send: it must not look delivered.
        writePromise?.fail(PeerChannelError.connectionClosed)
    }

    /// Closes once `write` (the frame that says why) has left, or at once if there is none.
    private func close(after write: EventLoopFuture<Void>?, context: ChannelHandlerContext) {
        guard let write else {
            context.close(promise: nil)
            return
        }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        finalWriteDeadline = context.eventLoop.scheduleTask(in: Self.finalWriteTimeout) {
            bound.value.close(promise: nil)
        }
        write.assumeIsolated().whenComplete { _ in bound.value.close(promise: nil) }
    }

    /// - Parameter hungUpMidHandshake: the peer closed TCP while the handshake messages were
    ///   being exchanged.
    private func ended(_ end: ConnectionEnd, context: ChannelHandlerContext, hungUpMidHandshake: Bool = false) {
        untoldEnd = nil
        if end.kind == .localClose || end.kind == .peerClosed {
            logger.info("connection closed: \(end)")
        } else if hungUpMidHandshake {
            // Routine: the peer stopped, or dropped a connection that crossed one of its own
            // to this node. (Hanging up on our final message, a mesh key mismatch, stays a
            // warning: that state is past the handshake messages.)
            logger.notice("connection closed: \(end)")
        } else {
            logger.warning("connection closed: \(end)")
        }
        context.fireChannelRead(wrapInboundOut(.ended(end)))
        context.fireChannelReadComplete()
    }
}

/// Why the node could not send to a peer. A struct over a private enum, so new cases do not
/// break users.
public struct PeerChannelError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case notEstablished
        case connectionClosed
        case unknownPeer(PublicIdentity)
        case payloadTooLarge(Int)
        case alreadyRunning
    }

    private let kind: Kind
    private init(_ kind: Kind) { self.kind = kind }

    /// The handshake has not finished on this connection.
    public static let notEstablished = Self(.notEstablished)
    /// The connection closed (or is closing) before the bytes were written.
    public static let connectionClosed = Self(.connectionClosed)
    /// No authenticated connection to this peer.
    public static func unknownPeer(_ peer: PublicIdentity) -> Self { Self(.unknownPeer(peer)) }
    /// More bytes than one DATA frame carries (`WireConstants.maxDataPayloadByteCount`).
    public static func payloadTooLarge(_ byteCount: Int) -> Self { Self(.payloadTooLarge(byteCount)) }
    /// `MeshNode.run()` was called on a node that already ran.
    public static let alreadyRunning = Self(.alreadyRunning)

    public var description: String {
        switch kind {
        case .notEstablished: "the secure channel is not established yet"
        case .connectionClosed: "the connection closed before the bytes were written"
        case .unknownPeer(let peer): "no authenticated connection to \(peer)"
        case .payloadTooLarge(let count):
            "a payload of \(count) bytes is over the limit of \(WireConstants.maxDataPayloadByteCount) bytes for one DATA frame"
        case .alreadyRunning: "this node is already running, or ran before; make a new MeshNode"
        }
    }
}
