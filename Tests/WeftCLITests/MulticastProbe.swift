import Foundation
import Glibc
import Synchronization

/// A UDP socket on the multicast DNS port inside a namespace of a `NamespaceLAN`, joined to
/// the group there: how a test sends hostile packets to the nodes and asks them questions.
///
/// A network namespace belongs to a thread, and a socket keeps the namespace it was made in:
/// the socket is made on a thread of its own that enters the namespace (setns) and ends
/// there, so no thread of the test process ever runs in it afterwards.
final class MulticastProbe: @unchecked Sendable {
    // @unchecked: the descriptor is set once in init; sendto and recv on it are thread-safe.
    private let socket: Int32

    init(namespace: String, interfaceAddress: String) throws {
        let made = Mutex<Result<Int32, MulticastProbeError>>(.failure(MulticastProbeError("not made")))
        let done = DispatchSemaphore(value: 0)
        Thread {
            made.withLock { $0 = Self.make(namespace: namespace, interfaceAddress: interfaceAddress) }
            done.signal()
        }.start()
        done.wait()
        socket = try made.withLock { try $0.get() }
    }

    deinit { close(socket) }

    /// Sends `bytes` to 224.0.0.251:5353.
    func send(_ bytes: [UInt8]) {
        var group = sockaddr_in()
        group.sin_family = sa_family_t(AF_INET)
        group.sin_port = in_port_t(5353).bigEndian
        inet_pton(AF_INET, "224.0.0.251", &group.sin_addr)
        _ = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &group) { address in
                address.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(socket, buffer.baseAddress, buffer.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    /// The next datagram, or nil if none comes within `milliseconds`.
    func receive(milliseconds: Int32) -> [UInt8]? {
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, milliseconds) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 9000)
        let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        return count >= 0 ? Array(buffer.prefix(count)) : nil
    }

    /// Runs on a thread of its own, which it leaves in the namespace (the thread then ends).
    private static func make(namespace: String, interfaceAddress: String) -> Result<Int32, MulticastProbeError> {
        let handle = open("/var/run/netns/\(namespace)", O_RDONLY)
        guard handle >= 0 else { return .failure(MulticastProbeError("cannot open namespace \(namespace)")) }
        defer { close(handle) }
        guard enterNamespace(handle) == 0 else { return .failure(MulticastProbeError("setns: errno \(errno)")) }
        let fd = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return .failure(MulticastProbeError("socket: errno \(errno)")) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &yes, socklen_t(MemoryLayout<Int32>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_port = in_port_t(5353).bigEndian
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var membership = ip_mreq()
        inet_pton(AF_INET, "224.0.0.251", &membership.imr_multiaddr)
        inet_pton(AF_INET, interfaceAddress, &membership.imr_interface)
        var interface = membership.imr_interface
        guard bound == 0,
            setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &membership, socklen_t(MemoryLayout<ip_mreq>.size)) == 0,
            setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &interface, socklen_t(MemoryLayout<in_addr>.size)) == 0
        else {
            close(fd)
            return .failure(MulticastProbeError("bind or join: errno \(errno)"))
        }
        var ttl: UInt8 = 255
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_TTL, &ttl, 1)
        // Not its own packets back: a burst of them would fill the receive buffer and crowd
        // out the answers it waits for. And room for a burst of answers.
        var loop: UInt8 = 0
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, &loop, 1)
        var buffer: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
        return .success(fd)
    }
}

/// setns(2) for a network namespace: Glibc's module does not export it (it needs _GNU_SOURCE),
/// so it is looked up in the C library by name.
private func enterNamespace(_ descriptor: Int32) -> Int32 {
    typealias SetNamespace = @convention(c) (Int32, Int32) -> Int32
    guard let symbol = dlsym(nil, "setns") else { return -1 }
    let newNetworkNamespace: Int32 = 0x4000_0000  // CLONE_NEWNET
    return unsafeBitCast(symbol, to: SetNamespace.self)(descriptor, newNetworkNamespace)
}

struct MulticastProbeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
