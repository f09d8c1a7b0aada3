import WeftCrypto

/// A Weft node found on the LAN: where to dial it, and what its TXT record says.
public struct DiscoveredNode: Hashable, Sendable {
    /// The instance name, which identifies it while it is advertised.
    public var instance: DNSName
    public var host: DNSName
    public var port: UInt16
    /// IPv4 (4 bytes) and IPv6 (16 bytes) addresses of the host, as advertised.
    public var addresses: [[UInt8]]
    public var record: WeftServiceRecord
}

/// The browsing half of discovery, sans I/O (RFC 6762 §5.2, §10; RFC 6763 §4): asks the group
/// for `_weft._tcp.local` at growing intervals, keeps what answers say until their TTLs run
/// out (a goodbye, TTL 0, a second later), asks again for records near their expiry, and
/// reports Weft nodes as they become resolvable (PTR, SRV, TXT and an address) and as they go.
///
/// It keeps the service type's PTRs, its instances' SRV and TXT, and the addresses of hosts
/// those SRVs name, at most `maxCachedRecords` in all (`MDNSRecordCache` says which go when it
/// is full): whatever the LAN sends, its memory stays bounded, and a packet costs work in
/// proportion to its own records, not to what is cached.
///
/// Its first query and its refreshes wait a random while (RFC 6762 §5.2), from a generator
/// seeded at `init`: nodes started together do not ask in step, and when one asks, the answer
/// it draws refreshes every other cache on the link before they ask in turn.
public struct MDNSBrowser: Sendable {
    public enum Change: Hashable, Sendable {
        case found(DiscoveredNode)
        /// Gone: said goodbye, or stopped answering before its records expired.
        case lost(instance: DNSName)
    }

    /// The first query goes out 20 to 120 ms after start, the next a second later, then at
    /// doubling intervals up to an hour (RFC 6762 §5.2).
    public static let firstDelay: ClosedRange<UInt64> = 20...120
    public static let firstInterval: UInt64 = 1000
    public static let maxInterval: UInt64 = 3_600_000
    /// A record's TTL 0 (goodbye) removes it after this long (RFC 6762 §10.1).
    public static let goodbyeDelay: UInt64 = 1000

    /// At most this many records are held, in all (`MDNSRecordCache`: a full cache evicts the
    /// soonest-expiring record no found node uses): a LAN of 250 Weft nodes at four records
    /// each, as `MDNSResponder.maxRemembered` bounds what the responder remembers.
    public static let maxCachedRecords = 1024

    private var cache = MDNSRecordCache(capacity: MDNSBrowser.maxCachedRecords)
    private var nextQueryAt: UInt64?
    private var interval = MDNSBrowser.firstInterval
    private var random: SplitMix64
    /// What was reported found, by instance, to report changes and losses once.
    public private(set) var nodes: [DNSName: DiscoveredNode] = [:]
    /// The records this node's own responder advertises (`MDNSResponder.records()`): they
    /// come back from the group like anyone's, but the node is their source, so they are not
    /// kept, nor asked for, and its PTR goes into every browse query as a known answer (its
    /// own responder would answer it otherwise).
    public var ownRecords: [DNSResourceRecord] = [] {
        didSet { ownNames = Set(ownRecords.map(\.name)).subtracting([AdvertisedService.serviceType]) }
    }
    private var ownNames: Set<DNSName> = []
    /// When each resolving question last went out, to ask it at most once a second. Those
    /// older than a second are dropped whenever it has grown past `askedLimit`, twice what was
    /// left the last time: amortized, a constant cost per question.
    private var lastAsked: [DNSQuestion: UInt64] = [:]
    private var askedLimit = 64
    /// The least time between two identical resolving questions.
    public static let minimumRepeat: UInt64 = 1000

    /// How many records it holds (at most `maxCachedRecords`).
    public var cachedRecordCount: Int { cache.count }

    /// Whether it holds `record` (the same name, type and data).
    func holds(_ record: DNSResourceRecord) -> Bool { cache.contains(record) }

    /// - Parameter seed: seeds the random delays (tests fix it; by default it is random).
    public init(seed: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        random = SplitMix64(seed: seed)
    }

    /// When `tick` next has something to do (or may have: a record stored again leaves its
    /// old time behind, and `tick` then finds nothing to do).
    public var nextTick: UInt64? {
        [nextQueryAt, cache.nextDue].compactMap { $0 }.min()
    }

    /// Starts browsing: the first query goes out 20 to 120 ms later (`tick`).
    public mutating func start(now: UInt64) {
        nextQueryAt = now + UInt64.random(in: Self.firstDelay, using: &random)
    }

    /// Expires records, asks for those near expiry, sends the periodic query when due.
    public mutating func tick(now: UInt64) -> (queries: [DNSMessage], changes: [Change]) {
        var questions: [DNSQuestion] = []
        var asked: Set<DNSQuestion> = []
        var touched: Set<DNSName> = []
        // One random part for every refresh of this tick, as for the records of one packet.
        let jitter = UInt64.random(in: Self.refreshJitter, using: &random)
        for key in cache.takeDue(now: now) {
            guard let entry = cache.entries[key] else { continue }
            if entry.expires <= now {
                touch(entry.record, into: &touched)
                cache.remove(key)
            } else if let refresh = entry.nextRefresh, now >= refresh {
                let next = refreshTime(entry.record, received: entry.received, refreshes: entry.refreshes + 1, jitter: jitter)
                cache.refreshed(key, refreshes: entry.refreshes + 1, next: next)
                let question = DNSQuestion(entry.record.name, type: entry.record.type)
                if asked.insert(question).inserted { questions.append(question) }
            }
        }
        var queries: [DNSMessage] = []
        if let due = nextQueryAt, now >= due {
            questions.removeAll { $0.name == AdvertisedService.serviceType && $0.type == DNSRecordType.ptr }
            // Known answers: PTRs held with more than half their TTL left (RFC 6762 §7.1).
            let known = cache.entries(AdvertisedService.serviceType, DNSRecordType.ptr).filter {
                $0.expires > now && ($0.expires - now) * 2 > UInt64($0.record.ttl) * 1000
            }.sorted { $0.serial < $1.serial }.map { entry in
                var record = entry.record
                record.ttl = UInt32((entry.expires - now) / 1000)
                return record
            } + ownRecords.filter { $0.type == DNSRecordType.ptr && $0.name == AdvertisedService.serviceType }
            queries.append(DNSMessage(
                isResponse: false, questions: [DNSQuestion(AdvertisedService.serviceType, type: DNSRecordType.ptr)], answers: known))
            nextQueryAt = now + interval
            interval = min(interval * 2, Self.maxInterval)
        }
        if !questions.isEmpty { queries.append(DNSMessage(isResponse: false, questions: questions)) }
        let changes = resolve(touched)
        cache.compact()
        return (queries, changes)
    }

    /// Takes in a packet from the group: responses fill the cache (queries are not for us).
    /// The work is in proportion to its records and the cached ones that share their names.
    public mutating func received(_ message: DNSMessage, now: UInt64) -> (queries: [DNSMessage], changes: [Change]) {
        guard message.isResponse else { return ([], []) }
        let records = (message.answers + message.additionals).filter { Self.concerns($0) && !isOwn($0) }
        // SRV records before addresses: addresses are kept only for a host an SRV names, and a
        // responder sends a host's addresses with its SRV (RFC 6763 §12.2).
        let ordered = records.filter { !Self.isAddress($0) } + records.filter(Self.isAddress)
        // The records of one packet share their random part: those of one node (its SRV and
        // address, of one TTL) come due together and are asked for in one query.
        let jitter = UInt64.random(in: Self.refreshJitter, using: &random)
        // Instances whose resolution may change; `heard`, those this packet's records concern.
        var touched: Set<DNSName> = []
        var heard: Set<DNSName> = []
        var flushed: Set<NameAndType> = []
        for record in ordered {
            // An address of a host no SRV names is dropped: every host on the LAN announces
            // its addresses, and none concerns Weft until an SRV names it; then this browser
            // asks for them (below).
            if Self.isAddress(record), !cache.namesHost(record.name) { continue }
            // A cache-flush record replaces what the cache holds for its name and type, except
            // what came in the last second (RFC 6762 §10.2): once per packet, since what the
            // packet brings is spared anyway.
            if record.cacheFlush, flushed.insert(NameAndType(name: record.name, type: record.type)).inserted {
                cache.flush(for: record, now: now, expiry: now + Self.goodbyeDelay)
            }
            let expires = record.ttl == 0 ? now + Self.goodbyeDelay : now + UInt64(record.ttl) * 1000
            let refresh = refreshTime(record, received: now, refreshes: 0, jitter: jitter)
            let (stored, evicted) = cache.store(record, now: now, expires: expires, nextRefresh: refresh)
            if let evicted { touch(evicted, into: &touched) }
            if stored { touch(record, into: &heard) }
        }
        touched.formUnion(heard)
        cache.endPacket()
        // Ask for what an instance this packet concerns still lacks (its SRV and TXT, or its
        // host's addresses), each question at most once a second (RFC 6762 §5.2): a responder
        // that keeps sending incomplete answers cannot make this browser ask faster. Not for
        // what was evicted: the answer would only evict something else.
        var questions: Set<DNSQuestion> = []
        for instance in heard where isBrowsed(instance) {
            if srv(of: instance) == nil || txt(of: instance) == nil {
                questions.formUnion([DNSQuestion(instance, type: DNSRecordType.srv), DNSQuestion(instance, type: DNSRecordType.txt)])
            } else if let (_, host) = srv(of: instance), addresses(of: host).isEmpty {
                questions.formUnion([DNSQuestion(host, type: DNSRecordType.a), DNSQuestion(host, type: DNSRecordType.aaaa)])
            }
        }
        questions = questions.filter { lastAsked[$0].map { now.elapsed(since: $0) >= Self.minimumRepeat } ?? true }
        for question in questions { lastAsked[question] = now }
        if lastAsked.count > askedLimit {
            lastAsked = lastAsked.filter { now.elapsed(since: $0.value) < Self.minimumRepeat }
            askedLimit = 2 * lastAsked.count + 64
        }
        let queries = questions.isEmpty ? [] : [DNSMessage(isResponse: false, questions: questions.sorted { "\($0.name)" < "\($1.name)" })]
        let changes = resolve(touched)
        cache.compact()
        return (queries, changes)
    }

    /// A record of the node's own names, or a PTR to its own instance.
    private func isOwn(_ record: DNSResourceRecord) -> Bool {
        if ownNames.contains(record.name) { return true }
        if case .ptr(let target) = record.data { return ownNames.contains(target) }
        return false
    }

    // MARK: - The cache

    /// A record of the service type's, of an instance of it, or of an address.
    private static func concerns(_ record: DNSResourceRecord) -> Bool {
        switch record.data {
        case .ptr: record.name == AdvertisedService.serviceType
        case .srv, .txt: record.name.labels.count > 3 && (try? DNSName(labels: Array(record.name.labels.dropFirst()))) == AdvertisedService.serviceType
        case .a, .aaaa: true
        case .nsec, .other: false
        }
    }

    /// The random part of a refresh time, in ten-thousandths of a window of 2 % of the TTL
    /// (for 120 s, steps of 0.24 ms over 2.4 s): fine enough that nodes seldom draw the same
    /// moment.
    static let refreshJitter: ClosedRange<UInt64> = 0...10_000

    /// When to ask again for a record after `refreshes` queries for it: at 80, 85, 90 and 95 %
    /// of its TTL, each plus `jitter` of the 2 % that follow (RFC 6762 §5.2); none for a
    /// goodbye, after the fourth, or for the node's own names.
    private func refreshTime(_ record: DNSResourceRecord, received: UInt64, refreshes: Int, jitter: UInt64) -> UInt64? {
        guard record.ttl > 0, refreshes < 4, !ownNames.contains(record.name) else { return nil }
        let ttl = UInt64(record.ttl)
        return received + ttl * (800 + 50 * UInt64(refreshes)) + ttl * 20 * jitter / 10_000
    }

    private static func isAddress(_ record: DNSResourceRecord) -> Bool {
        record.type == DNSRecordType.a || record.type == DNSRecordType.aaaa
    }

    /// Adds the instances whose resolution `record` may change: its own, or those on its host.
    private func touch(_ record: DNSResourceRecord, into touched: inout Set<DNSName>) {
        switch record.data {
        case .ptr(let instance): touched.insert(instance)
        case .srv, .txt: touched.insert(record.name)
        case .a, .aaaa: touched.formUnion(cache.instances(on: record.name))
        case .nsec, .other: break
        }
    }

    /// The live (not goodbye) records of `name` and `type`, the last stored first.
    private func live(_ name: DNSName, _ type: UInt16) -> [DNSResourceRecord] {
        cache.entries(name, type).filter { $0.record.ttl > 0 }.sorted { $0.serial > $1.serial }.map(\.record)
    }

    /// Whether a live PTR of the service type names `instance`.
    private func isBrowsed(_ instance: DNSName) -> Bool {
        let ptr = DNSResourceRecord(AdvertisedService.serviceType, .ptr(instance), ttl: 0)
        return cache.entries[RecordKey(ptr)].map { $0.record.ttl > 0 } ?? false
    }

    /// The port and host of the instance's SRV record (the last stored, while one a cache-flush
    /// record replaced lives out its last second).
    private func srv(of instance: DNSName) -> (port: UInt16, host: DNSName)? {
        for record in live(instance, DNSRecordType.srv) {
            if case .srv(_, _, let port, let target) = record.data { return (port, target) }
        }
        return nil
    }

    private func txt(of instance: DNSName) -> [[UInt8]]? {
        for record in live(instance, DNSRecordType.txt) { if case .txt(let strings) = record.data { return strings } }
        return nil
    }

    private func addresses(of host: DNSName) -> [[UInt8]] {
        (live(host, DNSRecordType.a) + live(host, DNSRecordType.aaaa)).compactMap { record in
            switch record.data {
            case .a(let address), .aaaa(let address): address
            default: nil
            }
        }.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// The node `instance` resolves to now: PTR, SRV, TXT (naming a Weft node) and an address.
    private func resolved(_ instance: DNSName) -> DiscoveredNode? {
        guard isBrowsed(instance), let (port, host) = srv(of: instance), let strings = txt(of: instance),
            let record = WeftServiceRecord(txt: strings)
        else { return nil }
        let addresses = addresses(of: host)
        guard !addresses.isEmpty else { return nil }
        return DiscoveredNode(instance: instance, host: host, port: port, addresses: addresses, record: record)
    }

    /// The `touched` instances resolved again against those reported: what was found or
    /// changed, what went. A found node's records are in use in the cache (never evicted).
    private mutating func resolve(_ touched: Set<DNSName>) -> [Change] {
        var found: [DiscoveredNode] = []
        var lost: [DNSName] = []
        for instance in touched {
            let node = resolved(instance)
            let old = nodes[instance]
            guard node != old else { continue }
            if let old { cache.release(old) }
            if let node {
                cache.use(node)
                found.append(node)
            } else {
                lost.append(instance)
            }
            nodes[instance] = node
        }
        return found.sorted { "\($0.instance)" < "\($1.instance)" }.map { .found($0) }
            + lost.sorted { "\($0)" < "\($1)" }.map { .lost(instance: $0) }
    }
}
