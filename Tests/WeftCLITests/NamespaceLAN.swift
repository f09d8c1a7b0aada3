import Foundation
import WeftNode
import Testing

/// A LAN of its own for tests that must not touch the machine's interfaces (issue 8's rule):
/// a network namespace holding a bridge, and one namespace per node joined to it by a veth pair
/// (`eth0` in the node's namespace, `10.77.<lan>.<n>/24`), loopback up in each. Everything is
/// created inside the namespaces, and `remove()` (also on deinit) deletes them, which deletes
/// their interfaces. Needs root and iproute2: `NamespaceLAN.unavailable` says why not.
final class NamespaceLAN {
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/ip"

    /// Why this machine cannot build one (nil if it can): tests skip with this sentence.
    static let unavailable: String? = {
        guard getuid() == 0 else { return "network namespace tests need root (ip netns); not running as root" }
        guard FileManager.default.isExecutableFile(atPath: ip) else { return "network namespace tests need iproute2's ip; none found" }
        return nil
    }()

    let prefix: String
    let subnet: Int
    private(set) var namespaces: [String] = []
    private var removed = false

    var bridgeNamespace: String { "\(prefix)-br" }
    func namespace(_ node: Int) -> String { "\(prefix)-\(node)" }
    func address(_ node: Int) -> String { "10.77.\(subnet).\(node)" }

    /// Builds the bridge and `nodes` namespaces (numbered from 1).
    init(nodes: Int) throws {
        let tag = UInt32.random(in: 0...UInt32.max)
        prefix = "wft" + String(tag, radix: 16)
        subnet = Int(tag % 200) + 1
        do {
            try Self.run(["netns", "add", bridgeNamespace])
            namespaces.append(bridgeNamespace)
            try Self.run(["-n", bridgeNamespace, "link", "add", "br0", "type", "bridge"])
            try Self.run(["-n", bridgeNamespace, "link", "set", "br0", "up"])
            for node in 1...nodes {
                let ns = namespace(node)
                try Self.run(["netns", "add", ns])
                namespaces.append(ns)
                try Self.run(["-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "p\(node)", "netns", bridgeNamespace])
                try Self.run(["-n", bridgeNamespace, "link", "set", "p\(node)", "master", "br0", "up"])
                try Self.run(["-n", ns, "addr", "add", "\(address(node))/24", "dev", "eth0"])
                try Self.run(["-n", ns, "link", "set", "eth0", "up"])
                try Self.run(["-n", ns, "link", "set", "lo", "up"])
            }
        } catch {
            remove()
            throw error
        }
    }

    /// Deletes every namespace it made (their interfaces go with them).
    func remove() {
        guard !removed else { return }
        removed = true
        for ns in namespaces.reversed() { _ = try? Self.run(["netns", "del", ns]) }
    }

    deinit { remove() }

    /// Runs `ip ARGUMENTS`; a non-zero exit throws with its error output.
    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let out = Pipe()
        let err = Pipe()
        let process: SpawnedProcess
        do {
            defer {
                try? out.fileHandleForWriting.close()
                try? err.fileHandleForWriting.close()
            }
            process = try SpawnedProcess(
                executable: URL(fileURLWithPath: ip), arguments: arguments, environment: ProcessInfo.processInfo.environment,
                output: out.fileHandleForWriting.fileDescriptor, error: err.fileHandleForWriting.fileDescriptor)
        }
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        guard process.waitUntilExit() == .status(0) else {
            throw NamespaceLANError("ip \(arguments.joined(separator: " ")): \(String(decoding: errors, as: UTF8.self))")
        }
        return String(decoding: output, as: UTF8.self)
    }
}

struct NamespaceLANError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
