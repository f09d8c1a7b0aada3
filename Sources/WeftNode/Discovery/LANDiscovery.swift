import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import WeftCrypto
import WeftDiscovery

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// LAN discovery for a mesh node (SPEC.md §16): on each chosen interface, a socket on the
/// multicast DNS port that advertises the node's listener as `_weft._tcp`, browses for the
/// other nodes, and has the node dial those of its own mesh (`ConnectedPeer.Origin.discovered`)
/// until they leave. Needs no mDNS daemon, and shares port 5353 with one that runs
/// (SO_REUSEADDR and SO_REUSEPORT, as mDNS responders bind it).
public final class LANDiscovery: Sendable {
    /// The interfaces it runs on, chosen when it is made.
    public let interfaces: [DiscoveryInterface]
    public let statistics = DiscoveryStatistics()
    private let node: MeshNode
    private let group: any EventLoopGroup
    private let logger: Logger
    private let ports: AsyncStream<Int>
    private let portContinuation: AsyncStream<Int>.Continuation

    /// Chooses the interfaces (`DiscoveryInterface.select`) for `node`'s listener.
    /// - Parameter interfaceNames: the interfaces to run on; empty for every multicast IPv4
    ///   interface but loopback.
    /// - Throws: one sentence when discovery cannot run as asked (see `select`).
    public init(
        node: MeshNode, interfaceNames: [String], logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws(LANDiscoveryError) {
        guard let listen = node.configuration.listenAddress else {
            throw LANDiscoveryError("Discovery advertises the node's listener, and this node does not listen.")
        }
        let devices: [NIONetworkDevice]
        do {
            devices = try System.enumerateDevices()
        } catch {
            throw LANDiscoveryError("Cannot list the network interfaces for discovery: \(error).")
        }
        interfaces = try DiscoveryInterface.select(from: devices, names: interfaceNames, listenHost: listen.host)
        self.node = node
        self.group = group
        self.logger = logger
        (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
    }

    /// Tells discovery the port the node listens on, once it is bound (port 0 picks one).
    public func listening(onPort port: Int) { portContinuation.yield(port) }

    /// Waits for `listening(onPort:)`, then advertises and browses on every interface until
    /// graceful shutdown or cancellation; then sends each interface's goodbye and closes.
    /// An interface whose socket cannot be set up is logged and left out.
    public func run() async {
        var waiting = ports.makeAsyncIterator()
        guard let port = await waiting.next(), !Task.isCancelled else { return }
        if interfaces.isEmpty {
            logger.warning("discovery finds no interface with an IPv4 address and multicast other than loopback; it is idle")
        }
        var channels: [any Channel] = []
        for interface in interfaces {
            do {
                channels.append(try await open(on: interface, port: port))
                logger.info("discovery advertises port \(port) on \(interface.name) (\(interface.sendAddress.ipAddress ?? "?"))")
            } catch {
                logger.warning("cannot run discovery on \(interface.name): \(error)")
            }
        }
        // Returns on graceful shutdown, throws on cancellation: either way, the end.
        try? await gracefulShutdown()
        for channel in channels {
            do {
                try await channel.triggerUserOutboundEvent(MDNSChannelHandler.Command.stop).get()
            } catch {
                // The others then drop this node when its records expire, not at once.
                logger.warning("discovery could not say goodbye: \(error)")
            }
            try? await channel.close()
        }
        logger.info(
            "discovery stopped: \(statistics.packetsSent) packets sent, \(statistics.packetsReceived) received, \(statistics.packetsRejected) of them malformed")
    }

    /// Binds port 5353 beside any other responder, joins the group on `interface`, sends
    /// multicast out of it with TTL 255 (RFC 6762 §11) and loops it back to the other
    /// sockets of this host (nodes sharing a machine find each other), then starts.
    private func open(on interface: DiscoveryInterface, port: Int) async throws -> any Channel {
        let service = AdvertisedService(
            displayName: node.configuration.displayName, user: node.identity, meshTag: node.configuration.meshKey.tag,
            port: UInt16(port), addresses: interface.advertised)
        let peers = DiscoveredPeers(localUser: node.identity, meshTag: node.configuration.meshKey.tag)
        let channel = try await DatagramBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
            .channelOption(.receivePacketInfo, value: true)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 9000))
            .channelInitializer { [node, statistics, logger] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        MDNSChannelHandler(
                            interface: interface, service: service, peers: peers, statistics: statistics, logger: logger,
                            onAction: { action in Self.carryOut(action, node: node, logger: logger) }))
                }
            }
            .bind(host: "0.0.0.0", port: 5353).get()
        do {
            guard let options = channel as? SocketOptionProvider, let multicast = channel as? MulticastChannel,
                case .v4(let source) = interface.sendAddress
            else { throw LANDiscoveryError("the datagram channel offers no multicast") }
            try await options.setIPMulticastIF(source.address.sin_addr).get()
            try await options.setIPMulticastTTL(255).get()
            try await options.setIPMulticastLoop(1).get()
            try await multicast.joinGroup(MDNSChannelHandler.group, device: interfaceDevice(interface)).get()
            try await channel.triggerUserOutboundEvent(MDNSChannelHandler.Command.start).get()
            return channel
        } catch {
            try? await channel.close()
            throw error
        }
    }

    /// NIO joins a group on a device; the one it needs names the interface's IPv4 address.
    private func interfaceDevice(_ interface: DiscoveryInterface) -> NIONetworkDevice {
        NIONetworkDevice(
            name: interface.name, address: interface.sendAddress, netmask: nil, broadcastAddress: nil,
            pointToPointDestinationAddress: interface.sendAddress, multicastSupported: true, interfaceIndex: interface.index)
    }

    private static func carryOut(_ action: DiscoveredPeers.Action, node: MeshNode, logger: Logger) {
        switch action {
        case .dial(let text, let user):
            guard let address = PeerAddress(text) else { return }
            logger.info("discovered \(user) at \(address); dialing it")
            node.connect(to: address, how: .discovered)
        case .forget(let text):
            guard let address = PeerAddress(text) else { return }
            logger.info("the node at \(address) left the LAN; no longer dialing it")
            node.forget(address, ifFoundAs: .discovered)
        }
    }
}
