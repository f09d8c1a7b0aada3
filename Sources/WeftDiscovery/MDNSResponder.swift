import WeftCrypto

/// Where a multicast DNS packet goes: the group, or back to one sender (a querier on another
/// port than 5353 is a simple resolver that reads only unicast answers, RFC 6762 §6.7).
public enum MDNSDestination: Hashable, Sendable {
    case group
    case unicast(host: String, port: Int)
}

/// The service a node advertises on one interface (SPEC.md §16.1).
public struct AdvertisedService: Hashable, Sendable {
    /// The service type, `_weft._tcp.local`.
    // Constant names of valid labels: they cannot fail.
    public static let serviceType = try! DNSName("_weft._tcp.local")
    public static let domain = try! DNSName("local")

    /// The instance label before any renaming: "display name (tag)".
    public var instanceLabel: String
    /// The host label: "weft-" and eight hex digits.
    public var hostLabel: String
    public var port: UInt16
    public var txt: [[UInt8]]
    /// The interface's addresses: 4 bytes (A) or 16 (AAAA) each.
    public var addresses: [[UInt8]]

    /// - Throws: `badName` for an empty instance label, or a host label empty or over 63 bytes
    ///   (an instance label is cut to fit, with its rename suffix, `label(_:attempt:)`).
    public init(instanceLabel: String, hostLabel: String, port: UInt16, txt: [[UInt8]], addresses: [[UInt8]]) throws(DNSMessageError) {
        guard !instanceLabel.isEmpty, (1...DNSName.maxLabelByteCount).contains(hostLabel.utf8.count) else {
            throw DNSMessageError(.badName, "an instance label of \(instanceLabel.utf8.count) bytes or a host label of \(hostLabel.utf8.count)")
        }
        self.instanceLabel = instanceLabel
        self.hostLabel = hostLabel
        self.port = port
        self.txt = txt
        self.addresses = addresses
    }

    /// The instance label of the `attempt`th name (RFC 6763 §9: "name (2)", "name (3)", ...),
    /// the base cut at a character boundary so that the label fits its 63 bytes.
    static func label(_ base: String, attempt: Int) -> String {
        let suffix = attempt == 1 ? "" : " (\(attempt))"
        var cut = ""
        for character in base {
            guard cut.utf8.count + String(character).utf8.count + suffix.utf8.count <= DNSName.maxLabelByteCount else { break }
            cut.append(character)
        }
        return cut + suffix
    }
}

/// The advertising half of discovery, sans I/O (RFC 6762 §8, §10.1): probes its names, then
/// announces, answers queries for them, renames itself when another responder holds one of its
/// names, and says goodbye when stopped. Events in (`start`, `received`, `tick`, `stop`),
/// packets out; the caller sends them, and calls `tick` at `nextTick`. Times are milliseconds
/// of any monotonic clock.
public struct MDNSResponder: Sendable {
    public enum Phase: Hashable, Sendable {
        case idle
        /// Probe `sent` of 3 went out; the next at `nextTick`.
        case probing(sent: Int)
        case announcing(sent: Int)
        case running
        case stopped
    }

    public static let probeInterval: UInt64 = 250
    public static let announceInterval: UInt64 = 1000
    /// After losing a simultaneous probe, or too many conflicts, a responder waits this long.
    public static let conflictDelay: UInt64 = 1000
    public static let hostTTL: UInt32 = 120
    public static let serviceTTL: UInt32 = 4500

    public let service: AdvertisedService
    public private(set) var phase: Phase = .idle
    /// The name it probes or holds now: 1, then 2, 3, ... after conflicts.
    public private(set) var attempt = 1
    public private(set) var nextTick: UInt64?
    /// When each record last went to each destination (within the last second).
    private var lastSent: [SentRecord: UInt64] = [:]

    /// A record goes to one destination at most once in this many milliseconds...
    public static let repeatInterval: UInt64 = 1000
    /// ...or this many in defence against a probe for its name (RFC 6762 §6).
    public static let probeDefenseInterval: UInt64 = 250
    /// Unicast replies for this many record and destination pairs in one second at most: past
    /// it, a flood from many (spoofed) sources gets no replies rather than memory, while the
    /// group is still answered.
    public static let maxRemembered = 1024

    public init(service: AdvertisedService) { self.service = service }

    // Both labels are 1 to 63 bytes (checked by `AdvertisedService.init`, cut by `label`), and
    // the names they make are far under 255 bytes: these cannot fail.
    public var instanceName: DNSName {
        try! AdvertisedService.serviceType.prepending(Array(AdvertisedService.label(service.instanceLabel, attempt: attempt).utf8))
    }

    public var hostName: DNSName { try! AdvertisedService.domain.prepending(Array(service.hostLabel.utf8)) }

    /// Every record it owns, with their TTLs (`goodbye`: all 0).
    public func records(goodbye: Bool = false) -> [DNSResourceRecord] {
        let hostTTL = goodbye ? 0 : Self.hostTTL
        let serviceTTL = goodbye ? 0 : Self.serviceTTL
        var records = [
            DNSResourceRecord(AdvertisedService.serviceType, .ptr(instanceName), ttl: serviceTTL),
            DNSResourceRecord(instanceName, .srv(priority: 0, weight: 0, port: service.port, target: hostName), ttl: hostTTL, cacheFlush: true),
            DNSResourceRecord(instanceName, .txt(service.txt), ttl: serviceTTL, cacheFlush: true),
        ]
        for address in service.addresses {
            records.append(DNSResourceRecord(hostName, address.count == 4 ? .a(address) : .aaaa(address), ttl: hostTTL, cacheFlush: true))
        }
        return records
    }

    // MARK: - Events

    /// Starts probing: the first probe goes out at once.
    public mutating func start(now: UInt64) -> [(DNSMessage, MDNSDestination)] {
        guard phase == .idle else { return [] }
        return sendProbe(now: now, sent: 0)
    }

    /// Sends what is due at `now`.
    public mutating func tick(now: UInt64) -> [(DNSMessage, MDNSDestination)] {
        guard let due = nextTick, now >= due else { return [] }
        switch phase {
        case .probing(let sent) where sent < 3:
            return sendProbe(now: now, sent: sent)
        case .probing:
            // Three probes and no conflict: the names are ours.
            phase = .announcing(sent: 0)
            return announce(now: now, sent: 0)
        case .announcing(let sent):
            return announce(now: now, sent: sent)
        case .idle, .running, .stopped:
            nextTick = nil
            return []
        }
    }

    /// Handles a packet from the group (or sent to this node), from `source`.
    public mutating func received(_ message: DNSMessage, from source: MDNSDestination, now: UInt64) -> [(DNSMessage, MDNSDestination)] {
        switch phase {
        case .idle, .stopped:
            return []
        case .probing:
            if message.isResponse, claimsOurNames(message.answers + message.additionals) {
                return conflict(now: now)
            }
            if !message.isResponse, losesSimultaneousProbe(message) {
                // Another responder probes the same name and its data sorts later: try again
                // in a second (RFC 6762 §8.2).
                phase = .probing(sent: 0)
                nextTick = now + Self.conflictDelay
            }
            return []
        case .announcing, .running:
            if message.isResponse {
                return claimsOurNames(message.answers + message.additionals) ? conflict(now: now) : []
            }
            return answer(message, from: source, now: now)
        }
    }

    /// Stops advertising: every record once more with TTL 0 (goodbye), if it had announced.
    public mutating func stop() -> [(DNSMessage, MDNSDestination)] {
        defer {
            phase = .stopped
            nextTick = nil
        }
        switch phase {
        case .announcing, .running:
            return [(DNSMessage(isResponse: true, isAuthoritative: true, answers: records(goodbye: true)), .group)]
        case .idle, .probing, .stopped:
            return []
        }
    }

    // MARK: - Steps

    private mutating func sendProbe(now: UInt64, sent: Int) -> [(DNSMessage, MDNSDestination)] {
        let owned = records().filter { $0.name == instanceName || $0.name == hostName }
        let probe = DNSMessage(
            isResponse: false,
            questions: [
                DNSQuestion(instanceName, type: DNSRecordType.any, unicastResponse: sent == 0),
                DNSQuestion(hostName, type: DNSRecordType.any, unicastResponse: sent == 0),
            ],
            authorities: owned)
        phase = .probing(sent: sent + 1)
        nextTick = now + Self.probeInterval
        return [(probe, .group)]
    }

    private mutating func announce(now: UInt64, sent: Int) -> [(DNSMessage, MDNSDestination)] {
        let announcement = DNSMessage(isResponse: true, isAuthoritative: true, answers: records())
        if sent + 1 >= 2 {
            phase = .running
            nextTick = nil
        } else {
            phase = .announcing(sent: sent + 1)
            nextTick = now + Self.announceInterval
        }
        return [(announcement, .group)]
    }

    /// Another responder holds one of the names: the next name, probed from the start (after a
    /// second once it has happened ten times, so two stubborn hosts do not flood the group).
    private mutating func conflict(now: UInt64) -> [(DNSMessage, MDNSDestination)] {
        attempt += 1
        phase = .probing(sent: 0)
        if attempt > 10 {
            nextTick = now + Self.conflictDelay
            return []
        }
        return sendProbe(now: now, sent: 0)
    }

    /// Whether `records` hold our instance or host name with other data than ours (the same
    /// data is our own announcement coming back, or a cache repeating it).
    private func claimsOurNames(_ claimed: [DNSResourceRecord]) -> Bool {
        let ours = Set(records().map { RecordKey($0) })
        return claimed.contains { record in
            (record.name == instanceName || record.name == hostName) && record.ttl > 0 && !ours.contains(RecordKey(record))
                && (record.type == DNSRecordType.srv || record.type == DNSRecordType.txt || record.type == DNSRecordType.a
                    || record.type == DNSRecordType.aaaa)
                // A host may hold several addresses: only a host record of another kind conflicts.
                && !(record.name == hostName && (record.type == DNSRecordType.a || record.type == DNSRecordType.aaaa))
        }
    }

    /// RFC 6762 §8.2: two probes for one name compare their authority records; the lesser loses.
    private func losesSimultaneousProbe(_ probe: DNSMessage) -> Bool {
        let theirs = probe.authorities.filter { $0.name == instanceName }.map { DNSWriter.rdata($0.data) }.sorted { $0.lexicographicallyPrecedes($1) }
        guard !theirs.isEmpty else { return false }
        let ours = records().filter { $0.name == instanceName }.map { DNSWriter.rdata($0.data) }.sorted { $0.lexicographicallyPrecedes($1) }
        guard theirs != ours else { return false }
        return ours.lexicographicallyPrecedes(theirs, by: { $0.lexicographicallyPrecedes($1) })
    }

    /// The answer to a query: the records it asks for, less those it lists as known with at
    /// least half their TTL left (RFC 6762 §7.1) and those sent to the same place less than a
    /// second ago (a quarter second for a probe; RFC 6762 §6), and the records that go with
    /// them. The last rule bounds what a flood of queries can draw: one answer per record and
    /// destination per second.
    private mutating func answer(_ query: DNSMessage, from source: MDNSDestination, now: UInt64) -> [(DNSMessage, MDNSDestination)] {
        let all = records()
        let known = Set(query.answers.filter { record in
            all.contains { RecordKey($0) == RecordKey(record) && record.ttl >= $0.ttl / 2 }
        }.map { RecordKey($0) })
        var answers: [DNSResourceRecord] = []
        for question in query.questions {
            for record in all where record.name == question.name && (question.type == DNSRecordType.any || question.type == record.type) {
                if !known.contains(RecordKey(record)), !answers.contains(record) { answers.append(record) }
            }
        }
        let destination: MDNSDestination
        if case .unicast(_, let port) = source, port != 5353 { destination = source } else { destination = .group }
        let interval = query.authorities.isEmpty ? Self.repeatInterval : Self.probeDefenseInterval
        lastSent = lastSent.filter { now.elapsed(since: $0.value) < Self.repeatInterval }
        answers.removeAll { record in lastSent[SentRecord(record: RecordKey(record), to: destination)].map { now.elapsed(since: $0) < interval } ?? false }
        guard !answers.isEmpty, destination == .group || lastSent.count < Self.maxRemembered else { return [] }
        for record in answers { lastSent[SentRecord(record: RecordKey(record), to: destination)] = now }
        // With a PTR, the records that resolve it; with an SRV, the addresses (RFC 6763 §12).
        var additionals: [DNSResourceRecord] = []
        if answers.contains(where: { $0.type == DNSRecordType.ptr }) {
            additionals += all.filter { $0.name == instanceName }
        }
        if answers.contains(where: { $0.type == DNSRecordType.srv }) || !additionals.isEmpty {
            additionals += all.filter { $0.name == hostName }
        }
        additionals.removeAll { answers.contains($0) }
        if case .unicast(_, let port) = source, port != 5353 {
            // A simple resolver: a unicast reply with its id and questions (RFC 6762 §6.7).
            return [(DNSMessage(id: query.id, isResponse: true, isAuthoritative: true, questions: query.questions,
                                answers: answers.map { var r = $0; r.cacheFlush = false; r.ttl = min(r.ttl, 10); return r },
                                additionals: additionals), source)]
        }
        return [(DNSMessage(isResponse: true, isAuthoritative: true, answers: answers, additionals: additionals), .group)]
    }
}

/// A record sent to a destination, for the once-a-second rule.
struct SentRecord: Hashable {
    let record: RecordKey
    let to: MDNSDestination
}

/// A record's identity for comparing: name, type and data (not TTL or flags).
struct RecordKey: Hashable {
    let name: DNSName
    let type: UInt16
    let data: [UInt8]

    init(_ record: DNSResourceRecord) {
        name = record.name
        type = record.type
        data = DNSWriter.rdata(record.data)
    }
}

extension DNSWriter {
    /// A record's data on the wire, names uncompressed: what RFC 6762 compares.
    static func rdata(_ data: DNSRecordData) -> [UInt8] {
        var writer = DNSWriter(compressing: false)
        writer.record(DNSResourceRecord(try! DNSName(labels: []), data, ttl: 0))  // the root name: no label to refuse
        return Array(writer.bytes.dropFirst(11))
    }
}

extension AdvertisedService {
    /// At most this many bytes of the display name go into the instance label (SPEC.md §16.1).
    public static let maxDisplayNameByteCount = 48

    /// What a node advertises (SPEC.md §16.1): the instance label "display name (tag)" (the
    /// name cut at a character boundary to 48 bytes, the tag the first two bytes of the user's
    /// key in hex), the host label "weft-" and its first four bytes, and the TXT record.
    public init(displayName: String, user: PublicIdentity, meshTag: [UInt8], port: UInt16, addresses: [[UInt8]]) {
        var name = ""
        for character in displayName {
            guard name.utf8.count + String(character).utf8.count <= Self.maxDisplayNameByteCount else { break }
            name.append(character)
        }
        let key = user.bytes
        // Labels of 1 to 60 bytes: the name is cut to 48, the suffix and host are fixed.
        try! self.init(
            instanceLabel: "\(name) (\(WeftServiceRecord.hex(Array(key.prefix(2)))))",
            hostLabel: "weft-\(WeftServiceRecord.hex(Array(key.prefix(4))))", port: port,
            txt: WeftServiceRecord(user: user, meshTag: meshTag).txtStrings, addresses: addresses)
    }
}

extension UInt64 {
    /// Milliseconds from `earlier` to this time, 0 if `earlier` is later: a clock that steps
    /// back (or a caller that mixes clocks) makes things recent, never a trap.
    func elapsed(since earlier: UInt64) -> UInt64 { self >= earlier ? self - earlier : 0 }
}
