/// The records an `MDNSBrowser` holds (RFC 6762 §10): bounded, so that nothing a LAN sends
/// grows it without end, and indexed, so that a packet costs work in proportion to its own
/// records and the records that share their names, not to the whole cache.
///
/// **Bounded.** At most `MDNSBrowser.maxCachedRecords` records. When it is full, a new
/// record evicts the record that expires soonest among those no found node uses; when every
/// record is in use, the new one is refused. Evicting rather than refusing, because refused
/// newcomers would stay shut out for as long as a flood's records live, and the flooder
/// picks their TTLs; evicting, a flood displaces only what was still waiting to resolve, and
/// the first announcement after it gets in. The soonest-expiring, because it is the record
/// the cache would lose first anyway (a goodbye or a flushed record, due within a second,
/// goes before anything live). A found node's records are never evicted, so a flood cannot
/// make a node forget the peers it dials; and a packet never evicts its own records (they
/// join the eviction order when it ends, `endPacket`), so one announcement is kept whole.
///
/// **Indexed.** By name and type, and SRV records by their target host. Refresh and expiry
/// times, and the eviction order, are min-heaps: an item made stale (its record stored again,
/// flushed, or gone) is skipped when it comes up, and each heap is rebuilt from the records
/// once it holds more than twice as many items as there are records (`compact`).
struct MDNSRecordCache: Sendable {
    /// A cached record: when it came and expires, and which refresh query is next.
    struct Entry: Sendable {
        var record: DNSResourceRecord
        var received: UInt64
        var expires: UInt64
        /// 0 to 3: the query at 80, 85, 90 or 95 % of the TTL is next; 4: none is left.
        var refreshes: Int
        var nextRefresh: UInt64?
        /// Which store this is: tells the heaps' current items from stale ones.
        var serial: UInt64

        /// When the record next needs something: a refresh query, or removal.
        var due: UInt64 { nextRefresh ?? expires }
    }

    /// A time in a heap: a record's due time or expiry, as of one store.
    private struct Deadline: Comparable, Sendable {
        var time: UInt64
        var serial: UInt64
        var key: RecordKey

        static func < (a: Self, b: Self) -> Bool { (a.time, a.serial) < (b.time, b.serial) }
        static func == (a: Self, b: Self) -> Bool { (a.time, a.serial) == (b.time, b.serial) }
    }

    private let capacity: Int
    private(set) var entries: [RecordKey: Entry] = [:]
    private var byName: [NameAndType: Set<RecordKey>] = [:]
    /// SRV records by the host they name.
    private var bySRVTarget: [DNSName: Set<RecordKey>] = [:]
    private var dueTimes = PriorityQueue<Deadline>()
    /// Expiry times of the records that may be evicted (stale items and found nodes' records
    /// are dropped when they come up).
    private var evictionOrder = PriorityQueue<Deadline>()
    /// Records stored during the current packet: they join `evictionOrder` when it ends.
    private var unranked: [RecordKey] = []
    /// The instances and hosts of found nodes (`use`), whose records are not evicted.
    private var usedInstances: Set<DNSName> = []
    private var usedHosts: [DNSName: Int] = [:]
    private var lastSerial: UInt64 = 0

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    /// When the next refresh or expiry is due (possibly earlier: a stale time, skipped then).
    var nextDue: UInt64? { dueTimes.min?.time }

    // MARK: - Reading

    /// The cached records of `name` and `type`, goodbyes included.
    func entries(_ name: DNSName, _ type: UInt16) -> [Entry] {
        byName[NameAndType(name: name, type: type)].map { $0.compactMap { entries[$0] } } ?? []
    }

    func contains(_ record: DNSResourceRecord) -> Bool { entries[RecordKey(record)] != nil }

    /// Whether an SRV record names `host` (only then are its addresses kept).
    func namesHost(_ host: DNSName) -> Bool { bySRVTarget[host] != nil }

    /// The instances whose SRV records name `host`.
    func instances(on host: DNSName) -> Set<DNSName> { Set((bySRVTarget[host] ?? []).map(\.name)) }

    // MARK: - Changing

    /// Stores `record`, replacing the one cached with the same name, type and data. A new
    /// record in a full cache evicts another or is refused (see the type's comment).
    /// - Returns: whether it was stored, and the record evicted for it.
    mutating func store(_ record: DNSResourceRecord, now: UInt64, expires: UInt64, nextRefresh: UInt64?)
        -> (stored: Bool, evicted: DNSResourceRecord?)
    {
        let key = RecordKey(record)
        var evicted: DNSResourceRecord?
        if entries[key] == nil {
            if entries.count >= capacity {
                guard let victim = evictionVictim() else { return (false, nil) }
                evicted = remove(victim)
            }
            byName[NameAndType(name: key.name, type: key.type), default: []].insert(key)
            if case .srv(_, _, _, let target) = record.data { bySRVTarget[target, default: []].insert(key) }
        }
        lastSerial += 1
        let entry = Entry(record: record, received: now, expires: expires, refreshes: 0, nextRefresh: nextRefresh, serial: lastSerial)
        entries[key] = entry
        dueTimes.insert(Deadline(time: entry.due, serial: entry.serial, key: key))
        unranked.append(key)
        return (true, evicted)
    }

    /// A cache-flush `record` (RFC 6762 §10.2): the other records of its name and type,
    /// received more than a second before `now`, expire at `expiry` (unless sooner) and are
    /// not refreshed.
    mutating func flush(for record: DNSResourceRecord, now: UInt64, expiry: UInt64) {
        let key = RecordKey(record)
        for other in byName[NameAndType(name: key.name, type: key.type)] ?? [] where other != key {
            guard var entry = entries[other], now.elapsed(since: entry.received) > 1000 else { continue }
            entry.expires = min(entry.expires, expiry)
            entry.nextRefresh = nil
            entries[other] = entry
            dueTimes.insert(Deadline(time: entry.due, serial: entry.serial, key: other))
            evictionOrder.insert(Deadline(time: entry.expires, serial: entry.serial, key: other))
        }
    }

    /// Ends a packet: what it stored may now be evicted for later ones.
    mutating func endPacket() {
        for key in unranked {
            guard let entry = entries[key] else { continue }
            evictionOrder.insert(Deadline(time: entry.expires, serial: entry.serial, key: key))
        }
        unranked.removeAll(keepingCapacity: true)
    }

    /// Removes a record; returns it, nil if it was not cached.
    @discardableResult
    mutating func remove(_ key: RecordKey) -> DNSResourceRecord? {
        guard let entry = entries.removeValue(forKey: key) else { return nil }
        let nameAndType = NameAndType(name: key.name, type: key.type)
        byName[nameAndType]?.remove(key)
        if byName[nameAndType]?.isEmpty == true { byName[nameAndType] = nil }
        if case .srv(_, _, _, let target) = entry.record.data {
            bySRVTarget[target]?.remove(key)
            if bySRVTarget[target]?.isEmpty == true { bySRVTarget[target] = nil }
        }
        return entry.record
    }

    /// Takes the records due at `now` (a refresh query or removal), each once.
    mutating func takeDue(now: UInt64) -> [RecordKey] {
        var due: [RecordKey] = []
        var seen: Set<RecordKey> = []
        while let next = dueTimes.min, next.time <= now {
            _ = dueTimes.popMin()
            guard let entry = entries[next.key], entry.serial == next.serial, entry.due == next.time,
                seen.insert(next.key).inserted
            else { continue }
            due.append(next.key)
        }
        return due
    }

    /// Records that a refresh query went out: `refreshes` so far, the next at `next`.
    mutating func refreshed(_ key: RecordKey, refreshes: Int, next: UInt64?) {
        guard var entry = entries[key] else { return }
        entry.refreshes = refreshes
        entry.nextRefresh = next
        entries[key] = entry
        dueTimes.insert(Deadline(time: entry.due, serial: entry.serial, key: key))
    }

    /// A node was found: its records are in use and not evicted.
    mutating func use(_ node: DiscoveredNode) {
        usedInstances.insert(node.instance)
        usedHosts[node.host, default: 0] += 1
    }

    /// A node found before was lost or changed: its records may be evicted again (those still
    /// in use by what it became are dropped from the order when they come up).
    mutating func release(_ node: DiscoveredNode) {
        usedInstances.remove(node.instance)
        if let uses = usedHosts[node.host] { usedHosts[node.host] = uses > 1 ? uses - 1 : nil }
        let ptr = DNSResourceRecord(AdvertisedService.serviceType, .ptr(node.instance), ttl: 0)
        var keys: [RecordKey] = [RecordKey(ptr)]
        for (name, type) in [(node.instance, DNSRecordType.srv), (node.instance, DNSRecordType.txt),
                             (node.host, DNSRecordType.a), (node.host, DNSRecordType.aaaa)] {
            keys += byName[NameAndType(name: name, type: type)] ?? []
        }
        for key in keys {
            guard let entry = entries[key] else { continue }
            evictionOrder.insert(Deadline(time: entry.expires, serial: entry.serial, key: key))
        }
    }

    /// Rebuilds a heap that holds more than twice as many items as there are records (plus a
    /// little): stale items cost memory only until then. Called between packets.
    mutating func compact() {
        // Called by the browser between packets only; a packet's content cannot change when.
        precondition(unranked.isEmpty, "compact() between packets, after endPacket()")
        let limit = 2 * entries.count + 64
        if dueTimes.count > limit {
            dueTimes = PriorityQueue(entries.map { Deadline(time: $0.value.due, serial: $0.value.serial, key: $0.key) })
        }
        if evictionOrder.count > limit {
            evictionOrder = PriorityQueue(entries.filter { !isInUse($0.value.record) }.map {
                Deadline(time: $0.value.expires, serial: $0.value.serial, key: $0.key)
            })
        }
    }

    // MARK: - Eviction

    /// The soonest-expiring record no found node uses, nil if there is none.
    private mutating func evictionVictim() -> RecordKey? {
        while let next = evictionOrder.popMin() {
            guard let entry = entries[next.key], entry.serial == next.serial, entry.expires == next.time else { continue }
            // A found node's record leaves the order; `release` puts it back.
            if isInUse(entry.record) { continue }
            return next.key
        }
        return nil
    }

    private func isInUse(_ record: DNSResourceRecord) -> Bool {
        switch record.data {
        case .ptr(let instance): usedInstances.contains(instance)
        case .srv, .txt: usedInstances.contains(record.name)
        case .a, .aaaa: usedHosts[record.name] != nil
        case .nsec, .other: false
        }
    }
}

/// A name and a record type: what a cache-flush record replaces, and what a question asks.
struct NameAndType: Hashable, Sendable {
    var name: DNSName
    var type: UInt16
}
