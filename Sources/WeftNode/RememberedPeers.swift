import Foundation
import Synchronization

/// The peers a node was told to dial at run time (CONNECT, `weft connect`), kept in its home
/// (`peers`, SPEC.md §11) so that it dials them again after a restart. `weft disconnect`
/// (DISCONNECT) takes one out.
///
/// One address per line, `host:port`, in the order they were added. Written whole, durably
/// and atomically as every file of the home (`peers.tmp`, fsync, rename, fsync of the
/// directory), so a crash leaves the old list or the new one.
public final class RememberedPeers: Sendable {
    public let file: URL
    private let home: NodeHome
    private let lock = Mutex(())

    public init(home: NodeHome) {
        self.home = home
        file = home.directory.appendingPathComponent("peers")
    }

    /// The remembered addresses, and the lines that are not one (reported, then dropped at the
    /// next change). No file: none.
    public func load() -> (addresses: [PeerAddress], unreadable: [String]) {
        lock.withLock { _ in read() }
    }

    /// Remembers `address` (once).
    public func add(_ address: PeerAddress) throws {
        try lock.withLock { _ in
            var addresses = read().addresses
            guard !addresses.contains(address) else { return }
            addresses.append(address)
            try write(addresses)
        }
    }

    /// Forgets `address`; whether it was remembered.
    @discardableResult
    public func remove(_ address: PeerAddress) throws -> Bool {
        try lock.withLock { _ in
            var addresses = read().addresses
            guard let index = addresses.firstIndex(of: address) else { return false }
            addresses.remove(at: index)
            try write(addresses)
            return true
        }
    }

    private func read() -> (addresses: [PeerAddress], unreadable: [String]) {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return ([], []) }
        var addresses: [PeerAddress] = []
        var unreadable: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if let address = PeerAddress(String(line)) { addresses.append(address) } else { unreadable.append(String(line)) }
        }
        return (addresses, unreadable)
    }

    private func write(_ addresses: [PeerAddress]) throws {
        do {
            try home.write(Array(addresses.map { "\($0)\n" }.joined().utf8), to: file)
        } catch {
            throw RememberedPeersError("\(error)")
        }
    }
}

/// Why the remembered peers could not be written, in one sentence.
public struct RememberedPeersError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = "Cannot write the peers this node remembers: " + description }
}
