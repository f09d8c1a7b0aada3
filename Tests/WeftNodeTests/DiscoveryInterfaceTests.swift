import NIOCore
import Testing
import WeftNode

/// Which interfaces LAN discovery runs on, and what it advertises on each (SPEC.md §16).
@Suite("discovery's interfaces")
struct DiscoveryInterfaceTests {
    static func device(_ name: String, _ address: String, index: Int, multicast: Bool = true) -> NIONetworkDevice {
        let socket = try! SocketAddress(ipAddress: address, port: 0)  // literal test addresses
        return NIONetworkDevice(
            name: name, address: socket, netmask: nil, broadcastAddress: nil, pointToPointDestinationAddress: socket,
            multicastSupported: multicast, interfaceIndex: index)
    }

    static let machine = [
        device("lo", "127.0.0.1", index: 1), device("lo", "::1", index: 1),
        device("eth0", "10.0.0.5", index: 2), device("eth0", "10.0.1.5", index: 2),
        device("eth0", "2001:db8::5", index: 2), device("eth0", "fe80::5", index: 2),
        device("wg0", "10.9.0.1", index: 3, multicast: false),
        device("eth1", "192.168.1.7", index: 4),
        device("v6only", "2001:db8::9", index: 5),
    ]

    @Test("the IPv4 wildcard: every multicast IPv4 interface but loopback, with all its IPv4 addresses")
    func wildcard() throws {
        let chosen = try DiscoveryInterface.select(from: Self.machine, names: [], listenHost: "0.0.0.0")
        #expect(chosen.map(\.name) == ["eth0", "eth1"])
        #expect(chosen.map(\.index) == [2, 4])
        #expect(chosen[0].advertised == [[10, 0, 0, 5], [10, 0, 1, 5]])
        #expect(chosen[0].sendAddress.ipAddress == "10.0.0.5")
        #expect(chosen[1].advertised == [[192, 168, 1, 7]])
    }

    @Test("the IPv6 wildcard adds the interface's IPv6 addresses but link-local ones")
    func wildcardV6() throws {
        let chosen = try DiscoveryInterface.select(from: Self.machine, names: ["eth0"], listenHost: "::")
        #expect(chosen.map(\.name) == ["eth0"])
        #expect(chosen[0].advertised.map(\.count) == [4, 4, 16])
        #expect(chosen[0].advertised[2] == [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [5])
    }

    @Test("a listener on one address is advertised on the interface that holds it, only")
    func oneAddress() throws {
        let chosen = try DiscoveryInterface.select(from: Self.machine, names: [], listenHost: "192.168.1.7")
        #expect(chosen.map(\.name) == ["eth1"])
        #expect(chosen[0].advertised == [[192, 168, 1, 7]])
    }

    @Test("refused with one sentence: loopback, a host name, an interface that cannot multicast or does not exist")
    func refused() {
        for (names, host, words) in [
            ([], "127.0.0.1", "loopback"), ([], "::1", "loopback"), ([], "localhost", "IP address"),
            (["wg0"], "0.0.0.0", "no interface wg0"), (["eth9"], "0.0.0.0", "no interface eth9"),
            (["v6only"], "::", "no interface v6only"),
        ] {
            #expect {
                _ = try DiscoveryInterface.select(from: Self.machine, names: names, listenHost: host)
            } throws: { error in
                let text = "\(error)"
                return text.contains(words) && text.hasSuffix(".") && !text.contains("\n")
            }
        }
    }
}
