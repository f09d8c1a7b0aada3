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

    /// A cached record: when it came and expires, and which refresh query is next.
    private struct Entry {
        var record: DNSResourceRecord
        var received: UInt64
        var expires: UInt64
        /// 0 to 3: the query at 80, 85, 90 or 95 % of the TTL is next; 4: none is left.
        var refreshes: Int
        var nextRefresh: UInt64?
    }

    /// Cached records by identity.
    private var cache: [RecordKey: Entry] = [:]
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
    /// When each resolving question last went out, to ask it at most once a second.
    private var lastAsked: [DNSQuestion: UInt64] = [:]
    /// The least time between two identical resolving questions.
    public static let minimumRepeat: UInt64 = 1000

    /// - Parameter seed: seeds the random delays (tests fix it; by default it is random).
    public init(seed: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        random = SplitMix64(seed: seed)
    }

    /// When `tick` next has something to do.
    public var nextTick: UInt64? {
        ([nextQueryAt] + cache.values.map { $0.nextRefresh ?? $0.expires }).compactMap { $0 }.min()
    }

    /// Starts browsing: the first query goes out 20 to 120 ms later (`tick`).
    public mutating func start(now: UInt64) {
        nextQueryAt = now + UInt64.random(in: Self.firstDelay, using: &random)
    }

    /// Expires records, asks for those near expiry, sends the periodic query when due.
    public mutating func tick(now: UInt64) -> (queries: [DNSMessage], changes: [Change]) {
        var questions: [DNSQuestion] = []
        // One random part for every refresh of this tick, as for the records of one packet.
        let jitter = UInt64.random(in: Self.refreshJitter, using: &random)
        for (key, entry) in cache {
            if entry.expires <= now {
                cache[key] = nil
            } else if let refresh = entry.nextRefresh, now >= refresh {
                let next = refreshTime(entry.record, received: entry.received, refreshes: entry.refreshes + 1, jitter: jitter)
                cache[key]?.refreshes += 1
                cache[key]?.nextRefresh = next
                let question = DNSQuestion(entry.record.name, type: entry.record.type)
                if !questions.contains(question) { questions.append(question) }
            }
        }
        var queries: [DNSMessage] = []
        if let due = nextQueryAt, now >= due {
            questions.removeAll { $0.name == AdvertisedService.serviceType && $0.type == DNSRecordType.ptr }
            // Known answers: PTRs held with more than half their TTL left (RFC 6762 §7.1).
            let known = cache.values.filter {
                $0.record.type == DNSRecordType.ptr && $0.record.name == AdvertisedService.serviceType
                    && ($0.expires - now) * 2 > UInt64($0.record.ttl) * 1000
            }.map { entry in
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
        return (queries, resolve())
    }

    /// Takes in a packet from the group: responses fill the cache (queries are not for us).
    public mutating func received(_ message: DNSMessage, now: UInt64) -> (queries: [DNSMessage], changes: [Change]) {
        guard message.isResponse else { return ([], []) }
        let records = message.answers + message.additionals
        // The records of one packet share their random part: those of one node (its SRV and
        // address, of one TTL) come due together and are asked for in one query.
        let jitter = UInt64.random(in: Self.refreshJitter, using: &random)
        for record in records where Self.concerns(record) && !isOwn(record) {
            // A cache-flush record replaces what the cache holds for its name and type, except
            // what came in the last second (RFC 6762 §10.2).
            if record.cacheFlush {
                for (key, entry) in cache where entry.record.name == record.name && entry.record.type == record.type
                    && now.elapsed(since: entry.received) > 1000 && RecordKey(entry.record) != RecordKey(record)
                {
                    cache[key]?.expires = min(entry.expires, now + Self.goodbyeDelay)
                    cache[key]?.nextRefresh = nil
                }
            }
            let expires = record.ttl == 0 ? now + Self.goodbyeDelay : now + UInt64(record.ttl) * 1000
            let refresh = refreshTime(record, received: now, refreshes: 0, jitter: jitter)
            cache[RecordKey(record)] = Entry(record: record, received: now, expires: expires, refreshes: 0, nextRefresh: refresh)
        }
        // Ask for what a found instance still lacks (its SRV and TXT, or its host's addresses),
        // each question at most once a second (RFC 6762 §5.2): a responder that keeps sending
        // incomplete answers cannot make this browser ask faster.
        var questions: Set<DNSQuestion> = []
        for instance in instances() {
            if srv(of: instance) == nil || txt(of: instance) == nil {
                questions.formUnion([DNSQuestion(instance, type: DNSRecordType.srv), DNSQuestion(instance, type: DNSRecordType.txt)])
            } else if let (_, _, host) = srv(of: instance), addresses(of: host).isEmpty {
                questions.formUnion([DNSQuestion(host, type: DNSRecordType.a), DNSQuestion(host, type: DNSRecordType.aaaa)])
            }
        }
        lastAsked = lastAsked.filter { now.elapsed(since: $0.value) < Self.minimumRepeat }
        questions = questions.filter { lastAsked[$0] == nil }
        for question in questions { lastAsked[question] = now }
        let queries = questions.isEmpty ? [] : [DNSMessage(isResponse: false, questions: questions.sorted { "\($0.name)" < "\($1.name)" })]
        return (queries, resolve())
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

    private func live(_ name: DNSName, _ type: UInt16) -> [DNSResourceRecord] {
        cache.values.filter { $0.record.name == name && $0.record.type == type && $0.record.ttl > 0 }.map(\.record)
    }

    private func instances() -> [DNSName] {
        live(AdvertisedService.serviceType, DNSRecordType.ptr).compactMap { if case .ptr(let name) = $0.data { name } else { nil } }
    }

    private func srv(of instance: DNSName) -> (UInt16, UInt16, DNSName)? {
        for record in live(instance, DNSRecordType.srv) {
            if case .srv(let priority, _, let port, let target) = record.data { return (priority, port, target) }
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

    /// Instances resolvable now against those reported: what was found or changed, what went.
    private mutating func resolve() -> [Change] {
        var resolved: [DNSName: DiscoveredNode] = [:]
        for instance in instances() {
            guard let (_, port, host) = srv(of: instance), let strings = txt(of: instance),
                let record = WeftServiceRecord(txt: strings)
            else { continue }
            let addresses = addresses(of: host)
            guard !addresses.isEmpty else { continue }
            resolved[instance] = DiscoveredNode(instance: instance, host: host, port: port, addresses: addresses, record: record)
        }
        var changes: [Change] = []
        for (instance, node) in resolved.sorted(by: { "\($0.key)" < "\($1.key)" }) where nodes[instance] != node {
            changes.append(.found(node))
        }
        for instance in nodes.keys.sorted(by: { "\($0)" < "\($1)" }) where resolved[instance] == nil {
            changes.append(.lost(instance: instance))
        }
        nodes = resolved
        return changes
    }
}
