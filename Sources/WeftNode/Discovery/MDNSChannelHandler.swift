import Logging
import NIOCore
import WeftCrypto
import WeftDiscovery

/// Multicast DNS on one interface: the edge around the sans-I/O `MDNSResponder`,
/// `MDNSBrowser` and `DiscoveredPeers`. It decodes what arrives on its interface, feeds the
/// state machines, sends what they answer, runs their timers on the event loop, and hands
/// `DiscoveredPeers` actions to `onAction`. A packet that does not decode is counted and
/// dropped: the socket, and discovery, go on.
///
/// Driven by user outbound events: `Command.start` once the socket has joined the group,
/// `Command.stop` to say goodbye (its promise completes once the goodbye is written).
final class MDNSChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    enum Command: Sendable {
        case start
        case stop
    }

    /// The group and port of multicast DNS over IPv4 (RFC 6762 §3). (A constant, valid IPv4
    /// literal: the `try!` cannot fail.)
    static let group = try! SocketAddress(ipAddress: "224.0.0.251", port: 5353)

    private let interface: DiscoveryInterface
    private var responder: MDNSResponder
    private var browser = MDNSBrowser()
    private var peers: DiscoveredPeers
    private let onAction: @Sendable (DiscoveredPeers.Action) -> Void
    private let statistics: DiscoveryStatistics
    private let logger: Logger
    private var timer: Scheduled<Void>?
    private var running = false

    init(
        interface: DiscoveryInterface, service: AdvertisedService, peers: DiscoveredPeers, statistics: DiscoveryStatistics,
        logger: Logger, onAction: @escaping @Sendable (DiscoveredPeers.Action) -> Void
    ) {
        self.interface = interface
        self.responder = MDNSResponder(service: service)
        self.peers = peers
        self.statistics = statistics
        self.logger = logger
        self.onAction = onAction
    }

    /// Milliseconds of the event loop's monotonic clock: the state machines' time.
    private static var now: UInt64 { NIODeadline.now().uptimeNanoseconds / 1_000_000 }

    // MARK: - Commands

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let command = event as? Command else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch command {
        case .start:
            guard !running else { promise?.succeed(); return }
            running = true
            browser.ownRecords = responder.records()
            let now = Self.now
            send(responder.start(now: now), context: context)
            browser.start(now: now)
            schedule(context: context)
            promise?.succeed()
        case .stop:
            running = false
            timer?.cancel()
            timer = nil
            let goodbye = responder.stop()
            guard !goodbye.isEmpty else { promise?.succeed(); return }
            send(goodbye, context: context, promise: promise)
        }
    }

    // MARK: - Packets in

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard running else { return }
        // Every socket bound to port 5353 receives the group's packets from every interface
        // that joined it: keep this interface's.
        if let arrivedOn = envelope.metadata?.packetInfo?.interfaceIndex, arrivedOn != interface.index { return }
        statistics.received()
        let message: DNSMessage
        do {
            message = try DNSMessage(decoding: Array(envelope.data.readableBytesView))
        } catch {
            statistics.rejected()
            logger.debug("mDNS: a packet from \(envelope.remoteAddress) on \(interface.name) does not decode: \(error)")
            return
        }
        let source = MDNSDestination.unicast(host: envelope.remoteAddress.ipAddress ?? "", port: envelope.remoteAddress.port ?? 0)
        let now = Self.now
        let name = responder.instanceName
        send(responder.received(message, from: source, now: now), context: context)
        if responder.instanceName != name {
            logger.notice("mDNS: another responder on \(interface.name) holds \(name); advertising as \(responder.instanceName)")
            browser.ownRecords = responder.records()
        }
        let (queries, changes) = browser.received(message, now: now)
        send(queries.map { ($0, .group) }, context: context)
        apply(changes)
        schedule(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // The channel closed (with or without a stop): no timer may fire on a dead context.
        running = false
        timer?.cancel()
        timer = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A datagram socket's errors (an ICMP unreachable for a unicast reply, say) concern
        // one packet; the socket stays.
        logger.debug("mDNS on \(interface.name): \(error)")
    }

    // MARK: - Timers

    private func schedule(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        guard running, let due = [responder.nextTick, browser.nextTick].compactMap({ $0 }).min() else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(due * 1_000_000)) { [self] in
            fire(context: context)
        }
    }

    private func fire(context: ChannelHandlerContext) {
        guard running else { return }
        let now = Self.now
        send(responder.tick(now: now), context: context)
        let (queries, changes) = browser.tick(now: now)
        send(queries.map { ($0, .group) }, context: context)
        apply(changes)
        schedule(context: context)
    }

    // MARK: - Out

    private func apply(_ changes: [MDNSBrowser.Change]) {
        for change in changes {
            switch change {
            case .found(let node):
                if node.record.meshTag != peers.meshTag, !peers.otherMeshes.contains(node.instance) {
                    logger.info("mDNS: \(node.instance) on \(interface.name) is a node of another mesh; not dialing it")
                } else {
                    logger.debug("mDNS: found \(node.instance) on \(interface.name) at port \(node.port)")
                }
            case .lost(let instance):
                logger.debug("mDNS: \(instance) on \(interface.name) is gone")
            }
            for action in peers.apply(change) { onAction(action) }
        }
    }

    private func send(_ packets: [(DNSMessage, MDNSDestination)], context: ChannelHandlerContext, promise: EventLoopPromise<Void>? = nil) {
        let envelopes = packets.compactMap { message, destination -> AddressedEnvelope<ByteBuffer>? in
            let address: SocketAddress
            switch destination {
            case .group:
                address = Self.group
            case .unicast(let host, let port):
                guard let unicast = try? SocketAddress(ipAddress: host, port: port) else { return nil }
                address = unicast
            }
            return AddressedEnvelope(remoteAddress: address, data: context.channel.allocator.buffer(bytes: message.encoded()))
        }
        guard !envelopes.isEmpty else { promise?.succeed(); return }
        for (index, envelope) in envelopes.enumerated() {
            statistics.sent()
            context.write(wrapOutboundOut(envelope), promise: index == envelopes.count - 1 ? promise : nil)
        }
        context.flush()
    }
}
