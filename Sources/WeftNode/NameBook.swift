import DequeModule
import WeftCrypto
import WeftSync

/// The display names a node knows of other users (SPEC.md §14.12): each user's name from the
/// node info of its own handshake with this node (*direct*), or heard from a peer in NAMES.
///
/// Sans-I/O: the directory feeds it handshakes and NAMES entries, and it says which entries
/// are news worth telling other peers. Its rules are what make names travel without looping
/// and without a peer being able to take over the book:
/// - a direct name always wins: it replaces a heard one, and no heard one replaces it;
/// - a heard name is replaced only by what the same peer identity says later (the peer it was
///   first heard from stays its source), so a name follows one path from its user's node and
///   two sources cannot flip it back and forth; only a change is news, so the telling ends;
/// - at most `maxHeardPerPeer` users' names heard from one peer identity are kept, over all
///   its connections; entries past that are dropped and counted;
/// - at most `capacity` users in all: a new one makes room by forgetting the oldest heard
///   name, else (for a direct name) the oldest direct one. A heard name never pushes out a
///   direct one: with none heard to forget, it is dropped.
struct NameBook {
    typealias UserName = SyncMessage.UserName

    /// Where a name came from.
    enum Source: Equatable {
        case direct
        case heard(from: PublicIdentity)
    }

    private struct Entry {
        var name: String
        var source: Source
        /// When it entered its order (below): tells a live place in the order from a stale one.
        var serial: UInt64
    }

    /// Users remembered by name at most.
    let capacity: Int
    /// Users whose names, heard from one peer identity, are kept at most.
    let maxHeardPerPeer: Int
    /// The node's own user: what peers say of it is not kept (text output calls it "you").
    let localUser: PublicIdentity?

    private var entries: [PublicIdentity: Entry] = [:]
    /// Direct and heard users, oldest first: who is forgotten first. A user's place is stale
    /// once its entry has another serial (it was forgotten, or became direct); stale places
    /// are skipped, and swept when they outnumber the live ones.
    private var directOrder: Deque<(user: PublicIdentity, serial: UInt64)> = []
    private var heardOrder: Deque<(user: PublicIdentity, serial: UInt64)> = []
    private var nextSerial: UInt64 = 0
    /// Users whose kept name was heard from each peer identity.
    private var heardCounts: [PublicIdentity: Int] = [:]
    /// Entries dropped past `maxHeardPerPeer`, or past `capacity` with no heard name to forget.
    private(set) var dropped: UInt64 = 0

    init(capacity: Int, maxHeardPerPeer: Int, localUser: PublicIdentity?) {
        self.capacity = max(1, capacity)
        self.maxHeardPerPeer = maxHeardPerPeer
        self.localUser = localUser
    }

    // MARK: - Learning

    /// Takes the name `user`'s node gave in a handshake. Returns it when it is news: a user not
    /// known before, or a name that changed (an empty name is never news: there is nothing
    /// to tell).
    mutating func learn(_ name: String, of user: PublicIdentity) -> UserName? {
        let previous = entries[user]
        switch previous?.source {
        case .direct?:
            entries[user]?.name = name
        case .heard(let peer)?:
            uncount(peer)
            entries[user] = Entry(name: name, source: .direct, serial: place(user, direct: true))
        case nil:
            _ = makeRoom(forDirect: true)
            entries[user] = Entry(name: name, source: .direct, serial: place(user, direct: true))
        }
        guard !name.isEmpty, previous?.name != name else { return nil }
        return UserName(user: user, displayName: name)
    }

    /// Takes what `peer` says in one NAMES message, entry by entry. Returns the entries that
    /// are news: names of users not known before, and changes to names heard from `peer`.
    mutating func hear(_ names: [UserName], from peer: PublicIdentity) -> [UserName] {
        var news: [UserName] = []
        for heard in names where !heard.displayName.isEmpty && heard.user != localUser && heard.user != peer {
            switch entries[heard.user]?.source {
            case .direct?:
                continue  // a handshake said it
            case .heard(let source)?:
                guard source == peer, entries[heard.user]?.name != heard.displayName else { continue }
                entries[heard.user]?.name = heard.displayName
            case nil:
                guard heardCounts[peer, default: 0] < maxHeardPerPeer, makeRoom(forDirect: false) else {
                    dropped += 1
                    continue
                }
                heardCounts[peer, default: 0] += 1
                entries[heard.user] = Entry(
                    name: heard.displayName, source: .heard(from: peer), serial: place(heard.user, direct: false))
            }
            news.append(heard)
        }
        return news
    }

    // MARK: - Telling

    /// Every name worth telling `peer` when it connects, oldest first: all but the empty ones,
    /// its own, and those heard from it.
    func names(toTell peer: PublicIdentity) -> [UserName] {
        known.compactMap { user, name, source in
            guard !name.isEmpty, user != peer, source != .heard(from: peer) else { return nil }
            return UserName(user: user, displayName: name)
        }
    }

    /// Every user known, with its name and where it came from, oldest first.
    var known: [(user: PublicIdentity, name: String, source: Source)] {
        var live: [(serial: UInt64, user: PublicIdentity, entry: Entry)] = []
        live.reserveCapacity(entries.count)
        for (user, entry) in entries { live.append((entry.serial, user, entry)) }
        return live.sorted { $0.serial < $1.serial }.map { ($0.user, $0.entry.name, $0.entry.source) }
    }

    /// Users whose kept name was heard from `peer`.
    func heardCount(from peer: PublicIdentity) -> Int { heardCounts[peer] ?? 0 }

    var count: Int { entries.count }

    // MARK: - Bounds

    /// Gives `user` a place at the end of its order; returns the place's serial.
    private mutating func place(_ user: PublicIdentity, direct: Bool) -> UInt64 {
        nextSerial += 1
        if direct {
            directOrder.append((user, nextSerial))
            if directOrder.count > 2 * capacity { directOrder.removeAll { entries[$0.user]?.serial != $0.serial } }
        } else {
            heardOrder.append((user, nextSerial))
            if heardOrder.count > 2 * capacity { heardOrder.removeAll { entries[$0.user]?.serial != $0.serial } }
        }
        return nextSerial
    }

    /// Makes room for one more user, if the book is full: forgets the oldest heard name, or
    /// for a direct name with none heard, the oldest direct one. False if there is no room
    /// for a heard name.
    private mutating func makeRoom(forDirect direct: Bool) -> Bool {
        guard entries.count >= capacity else { return true }
        while let (user, serial) = heardOrder.popFirst() {
            guard let entry = entries[user], entry.serial == serial, case .heard(let peer) = entry.source else { continue }
            entries[user] = nil
            uncount(peer)
            return true
        }
        guard direct else { return false }
        while let (user, serial) = directOrder.popFirst() {
            guard entries[user]?.serial == serial else { continue }
            entries[user] = nil
            return true
        }
        return true
    }

    private mutating func uncount(_ peer: PublicIdentity) {
        guard let count = heardCounts[peer] else { return }
        heardCounts[peer] = count > 1 ? count - 1 : nil
    }
}
