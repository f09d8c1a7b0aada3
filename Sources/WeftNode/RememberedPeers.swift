import Foundation
import Synchronization
import WeftCrypto

/// The peers a node dials again after a restart, kept in its home (`peers`, SPEC.md §11):
/// addresses it was told to dial at run time (CONNECT, `weft connect`), and the address each
/// peer last announced in its handshake (the port it listens on, at the host it connected
/// from). The second kind is what finds a relay restarted on a new port: whichever side comes
/// back first dials the other where it last said it listens, and tells its own new port.
///
/// One entry per line: `host:port`, or `host:port weft1...` for the address a user's node last
/// announced. Written whole, durably and atomically as every file of the home (`peers.tmp`,
/// fsync, rename, fsync of the directory), so a crash leaves the old list or the new one.
public final class RememberedPeers: Sendable {
    /// One remembered address, and whose node last announced it there.
    public struct Entry: Hashable, Sendable {
        public var address: PeerAddress
        public var user: PublicIdentity?

        public init(address: PeerAddress, user: PublicIdentity? = nil) {
            self.address = address
            self.user = user
        }
    }

    /// How many announced addresses the file keeps: one per user, the least recently
    /// announced dropped first, so mesh members making up identities cannot grow it.
    public static let maxAnnouncedCount = 64

    public let file: URL
    private let home: NodeHome
    private let lock = Mutex(())

    public init(home: NodeHome) {
        self.home = home
        file = home.directory.appendingPathComponent("peers")
    }

    /// The remembered entries, and the lines that are not one (reported, then dropped at the
    /// next change). No file: none.
    public func load() -> (entries: [Entry], unreadable: [String]) {
        lock.withLock { _ in read() }
    }

    /// The remembered addresses.
    public func addresses() -> [PeerAddress] { load().entries.map(\.address) }

    /// Remembers `address` (once).
    public func add(_ address: PeerAddress) throws {
        try change { entries in
            guard !entries.contains(where: { $0.address == address }) else { return false }
            entries.append(Entry(address: address))
            return true
        }
    }

    /// Forgets `address`, and the address last announced by `user` (the node last found at
    /// `address`); whether anything was remembered.
    @discardableResult
    public func remove(_ address: PeerAddress, user: PublicIdentity? = nil) throws -> Bool {
        return try change { entries in
            let count = entries.count
            entries.removeAll { $0.address == address || (user != nil && $0.user == user) }
            return entries.count != count
        }
    }

    /// Remembers that `user`'s node listens at `address`, in place of where it listened before
    /// and of the address this node dialed to reach it (`dialed`, if it was remembered).
    public func announced(_ address: PeerAddress, by user: PublicIdentity, dialed: PeerAddress?) throws {
        try change { entries in
            let entry = Entry(address: address, user: user)
            if entries.last == entry { return false }
            let previous = entries
            entries.removeAll { $0.user == user || $0.address == address || ($0.address == dialed && $0.user == nil) }
            entries.append(entry)
            let announced = entries.indices.filter { entries[$0].user != nil }
            if announced.count > Self.maxAnnouncedCount {
                let dropped = Set(announced.prefix(announced.count - Self.maxAnnouncedCount))
                entries = entries.indices.filter { !dropped.contains($0) }.map { entries[$0] }
            }
            return entries != previous
        }
    }

    /// Reads, changes and writes back under the lock; `body` says whether it changed anything.
    @discardableResult
    private func change(_ body: (inout [Entry]) -> Bool) throws -> Bool {
        try lock.withLock { _ in
            var entries = read().entries
            guard body(&entries) else { return false }
            try write(entries)
            return true
        }
    }

    private func read() -> (entries: [Entry], unreadable: [String]) {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return ([], []) }
        var entries: [Entry] = []
        var unreadable: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard (1...2).contains(fields.count), let address = PeerAddress(String(fields[0])) else {
                unreadable.append(String(line))
                continue
            }
            if fields.count == 2 {
                guard let user = try? UserIdentifier.decode(String(fields[1])) else {
                    unreadable.append(String(line))
                    continue
                }
                entries.append(Entry(address: address, user: user))
            } else {
                entries.append(Entry(address: address))
            }
        }
        return (entries, unreadable)
    }

    private func write(_ entries: [Entry]) throws {
        let text = entries.map { entry in "\(entry.address)" + (entry.user.map { " \(UserIdentifier.encode($0))" } ?? "") + "\n" }.joined()
        do {
            try home.write(Array(text.utf8), to: file)
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
