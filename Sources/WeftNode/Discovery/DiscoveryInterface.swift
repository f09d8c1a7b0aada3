import NIOCore

/// An interface LAN discovery runs on (SPEC.md §16): one socket joined to the mDNS group
/// there, one responder advertising what is reachable through it, one browser.
public struct DiscoveryInterface: Hashable, Sendable {
    public var name: String
    public var index: Int
    /// The interface's IPv4 address, which multicast leaves from (IP_MULTICAST_IF).
    public var sendAddress: SocketAddress
    /// The addresses advertised here (A and AAAA records): 4 or 16 bytes each.
    public var advertised: [[UInt8]]

    /// The interfaces to run on, from the machine's `devices`: those named (all of them must
    /// exist with an IPv4 address and multicast), or with no names every multicast interface
    /// with an IPv4 address but loopback. Each advertises the addresses the listener takes
    /// connections on there: all its IPv4 addresses for `0.0.0.0`, its IPv6 ones too (not
    /// link-local, which need a scope to dial) for `::`, or the listening address itself on
    /// the interface that holds it.
    ///
    /// - Throws: one sentence for a listener on loopback (nobody on the LAN could dial it),
    ///   a listening host that is not an IP address, or a named interface that cannot be used.
    public static func select(
        from devices: [NIONetworkDevice], names: [String], listenHost: String
    ) throws(LANDiscoveryError) -> [DiscoveryInterface] {
        guard let listen = try? SocketAddress(ipAddress: listenHost, port: 0) else {
            throw LANDiscoveryError("Discovery needs the listening address as an IP address, not \"\(listenHost)\".")
        }
        let listenBytes = listen.addressBytes
        if listenBytes.isLoopback {
            throw LANDiscoveryError(
                "Discovery advertises the listening address, and \(listenHost) is loopback: listen on 0.0.0.0 or a LAN address, or pass --discovery off.")
        }
        let usable = devices.filter { device in
            guard let bytes = device.address?.addressBytes else { return false }
            return device.multicastSupported && bytes.count == 4 && !bytes.isLoopback && (names.isEmpty || names.contains(device.name))
        }
        for name in names where !usable.contains(where: { $0.name == name }) {
            throw LANDiscoveryError("There is no interface \(name) with an IPv4 address and multicast to run discovery on.")
        }
        var interfaces: [DiscoveryInterface] = []
        for device in usable where !interfaces.contains(where: { $0.name == device.name }) {
            guard let sendAddress = device.address else { continue }
            let held = devices.filter { $0.name == device.name }.compactMap { $0.address?.addressBytes }
            let advertised: [[UInt8]]
            if listenBytes.allSatisfy({ $0 == 0 }) {
                // The wildcard: IPv4 listens on every IPv4 address; IPv6's also on IPv6 ones.
                advertised = held.filter { $0.count == 4 || (listenBytes.count == 16 && !$0.isLinkLocalIPv6) }
            } else {
                advertised = held.contains(listenBytes) ? [listenBytes] : []
            }
            guard !advertised.isEmpty else { continue }
            interfaces.append(DiscoveryInterface(name: device.name, index: device.interfaceIndex, sendAddress: sendAddress, advertised: advertised))
        }
        return interfaces
    }
}

/// Why discovery cannot run as asked, in one sentence.
public struct LANDiscoveryError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension SocketAddress {
    /// The IP address's bytes: 4 for IPv4, 16 for IPv6, none for a Unix socket.
    var addressBytes: [UInt8] {
        switch self {
        case .v4(let address):
            withUnsafeBytes(of: address.address.sin_addr.s_addr) { Array($0) }
        case .v6(let address):
            withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
        case .unixDomainSocket:
            []
        }
    }
}

extension [UInt8] {
    var isLoopback: Bool {
        count == 4 ? self[0] == 127 : count == 16 && self == [UInt8](repeating: 0, count: 15) + [1]
    }

    var isLinkLocalIPv6: Bool { count == 16 && self[0] == 0xfe && self[1] & 0xc0 == 0x80 }
}
