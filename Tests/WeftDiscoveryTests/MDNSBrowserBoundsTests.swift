import Testing
import WeftCrypto
@testable import WeftDiscovery

@Suite("The mDNS browser's cache is bounded: addresses only of hosts an SRV names, at most 1,024 records, found peers kept")
struct MDNSBrowserBoundsTests {
    static let user = NodeIdentity.generate().publicKey
    static let tag = MeshKey.generate().tag
    static let cap = MDNSBrowser.maxCachedRecords

    /// What a Weft node's responder announces: PTR, SRV, TXT and one A record, with the
    /// responder's TTLs (120 s for SRV and address, 4500 s for PTR and TXT).
    static func node(_ label: String, address: [UInt8], withAddress: Bool = true, ttl: UInt32 = 1) -> [DNSResourceRecord] {
        let instance = try! AdvertisedService.serviceType.prepending(Array(label.utf8))
        let host = try! AdvertisedService.domain.prepending(Array("host-\(label)".utf8))
        var records = [
            DNSResourceRecord(AdvertisedService.serviceType, .ptr(instance), ttl: ttl * MDNSResponder.serviceTTL),
            DNSResourceRecord(instance, .srv(priority: 0, weight: 0, port: 7400, target: host), ttl: ttl * MDNSResponder.hostTTL, cacheFlush: true),
            DNSResourceRecord(instance, .txt(WeftServiceRecord(user: user, meshTag: tag).txtStrings), ttl: ttl * MDNSResponder.serviceTTL, cacheFlush: true),
        ]
        if withAddress { records.append(DNSResourceRecord(host, .a(address), ttl: ttl * MDNSResponder.hostTTL, cacheFlush: true)) }
        return records
    }

    static func response(_ records: [DNSResourceRecord]) -> DNSMessage { DNSMessage(isResponse: true, answers: records) }

    static func address(_ index: Int) -> [UInt8] { [10, UInt8(index >> 16 & 0xff), UInt8(index >> 8 & 0xff), UInt8(index & 0xff)] }

    static func found(_ changes: [MDNSBrowser.Change]) -> [DNSName] {
        changes.compactMap { if case .found(let node) = $0 { node.instance } else { nil } }
    }

    static func lost(_ changes: [MDNSBrowser.Change]) -> [DNSName] {
        changes.compactMap { if case .lost(let instance) = $0 { instance } else { nil } }
    }

    @Test("10,000 A records for hosts no SRV names are not kept; the found peer and its records stay")
    func addressFlood() throws {
        let alice = Self.node("alice", address: [10, 0, 0, 2])
        var browser = MDNSBrowser(seed: 1)
        browser.start(now: 0)
        #expect(Self.found(browser.received(Self.response(alice), now: 0).changes).count == 1)
        let held = browser.cachedRecordCount
        for packet in 0..<100 {
            let records = (0..<100).map { index in
                let host = try! AdvertisedService.domain.prepending(Array("printer-\(packet * 100 + index)".utf8))
                return DNSResourceRecord(host, .a(Self.address(packet * 100 + index)), ttl: 120, cacheFlush: true)
            }
            let (queries, changes) = browser.received(Self.response(records), now: 10 + UInt64(packet))
            #expect(queries.isEmpty && changes.isEmpty)
        }
        #expect(browser.cachedRecordCount == held)
        #expect(browser.cachedRecordCount <= Self.cap)
        #expect(alice.allSatisfy { browser.holds($0) })
        #expect(browser.nodes.count == 1)
    }

    @Test("A records for a host an SRV names are kept, in the same packet before or after it; heard before any SRV, asked for again")
    func namedHostAddresses() throws {
        let alice = Self.node("alice", address: [10, 0, 0, 2])
        let host = try #require(alice.compactMap { if case .srv(_, _, _, let target) = $0.data { target } else { nil } }.first)
        // The address first in the packet: still kept, the SRV naming its host being in it.
        var together = MDNSBrowser(seed: 2)
        together.start(now: 0)
        let changes = together.received(Self.response(alice.reversed()), now: 0).changes
        guard case .found(let node) = changes.first, changes.count == 1 else {
            Issue.record("not found: \(changes)")
            return
        }
        #expect(node.addresses == [[10, 0, 0, 2]] && node.host == host)

        // The address alone, before any SRV: dropped; once the SRV comes, asked for, and
        // when it comes again, the peer resolves.
        var apart = MDNSBrowser(seed: 3)
        apart.start(now: 0)
        let address = alice.filter { $0.type == DNSRecordType.a }
        #expect(apart.received(Self.response(address), now: 0).changes.isEmpty)
        #expect(apart.cachedRecordCount == 0)
        let service = apart.received(Self.response(alice.filter { $0.type != DNSRecordType.a }), now: 10)
        #expect(service.changes.isEmpty)
        #expect(Set(service.queries.flatMap(\.questions)) == [DNSQuestion(host, type: DNSRecordType.a), DNSQuestion(host, type: DNSRecordType.aaaa)])
        #expect(Self.found(apart.received(Self.response(address), now: 20).changes) == [node.instance])
        #expect(apart.nodes[node.instance]?.addresses == [[10, 0, 0, 2]])
    }

    @Test("PTR, SRV and TXT of 5,000 instances: the cache stays at the cap, a found peer keeps its records, and a node announced after the flood is found")
    func instanceFlood() throws {
        let alice = Self.node("alice", address: [10, 0, 0, 2])
        var browser = MDNSBrowser(seed: 4)
        browser.start(now: 0)
        _ = browser.received(Self.response(alice), now: 0)
        // Instances that never resolve (no address): in use by nobody, so evicted in turn,
        // the soonest-expiring first.
        for packet in 0..<500 {
            let records = (0..<10).flatMap { Self.node("flood-\(packet * 10 + $0)", address: [], withAddress: false) }
            let changes = browser.received(Self.response(records), now: 1 + UInt64(packet)).changes
            #expect(Self.lost(changes).isEmpty)
            #expect(browser.cachedRecordCount <= Self.cap)
        }
        #expect(browser.cachedRecordCount == Self.cap)
        #expect(alice.allSatisfy { browser.holds($0) }, "a found node's records are never evicted")
        #expect(browser.nodes.count == 1)
        // The last instance of the flood is whole: a packet never evicts its own records.
        #expect(Self.node("flood-4999", address: [], withAddress: false).allSatisfy { browser.holds($0) })

        let bob = Self.node("bob", address: [10, 0, 0, 3])
        #expect(Self.found(browser.received(Self.response(bob), now: 1000).changes).count == 1)
        #expect(browser.nodes.count == 2)
        #expect(browser.cachedRecordCount == Self.cap)
    }

    @Test("a full cache evicts the soonest-expiring record first")
    func soonestExpiringFirst() throws {
        var browser = MDNSBrowser(seed: 5)
        browser.start(now: 0)
        // Unresolved PTRs fill the cache: half live 100 s, half an hour.
        let ptrs = (0..<Self.cap).map { index in
            DNSResourceRecord(
                AdvertisedService.serviceType, .ptr(try! AdvertisedService.serviceType.prepending(Array("p-\(index)".utf8))),
                ttl: index.isMultiple(of: 2) ? 100 : 3600)
        }
        for start in stride(from: 0, to: ptrs.count, by: 64) {
            _ = browser.received(Self.response(Array(ptrs[start..<start + 64])), now: 0)
        }
        #expect(browser.cachedRecordCount == Self.cap)
        // A node's four records take the places of four short-lived PTRs.
        let carol = Self.node("carol", address: [10, 0, 0, 4])
        #expect(Self.found(browser.received(Self.response(carol), now: 10).changes).count == 1)
        let kept = ptrs.filter { browser.holds($0) }
        #expect(kept.count == Self.cap - carol.count)
        #expect(kept.filter { $0.ttl == 3600 }.count == Self.cap / 2, "no long-lived PTR went")
    }

    @Test("when every record belongs to a found node, new ones are refused until some go")
    func allInUse() throws {
        let alice = Self.node("alice", address: [10, 0, 0, 2])
        var browser = MDNSBrowser(seed: 6)
        browser.start(now: 0)
        _ = browser.received(Self.response(alice), now: 0)
        // Complete nodes, each found: the cache fills with records in use.
        var flood: [[DNSResourceRecord]] = []
        for index in 0..<(Self.cap / 4 + 50) {
            let records = Self.node("full-\(index)", address: Self.address(index + 100))
            flood.append(records)
            _ = browser.received(Self.response(records), now: 1 + UInt64(index))
            #expect(browser.cachedRecordCount <= Self.cap)
        }
        #expect(browser.cachedRecordCount == Self.cap)
        #expect(browser.nodes.count == Self.cap / 4)
        #expect(alice.allSatisfy { browser.holds($0) })
        let bob = Self.node("bob", address: [10, 0, 0, 3])
        #expect(browser.received(Self.response(bob), now: 2000).changes.isEmpty, "refused: nothing may be evicted")

        // One found node says goodbye; a second later its records are gone and bob fits.
        let goodbye = flood[0].map { record -> DNSResourceRecord in
            var record = record
            record.ttl = 0
            return record
        }
        #expect(Self.lost(browser.received(Self.response(goodbye), now: 3000).changes).count == 1)
        while let next = browser.nextTick, next <= 4000 { _ = browser.tick(now: next) }
        #expect(browser.cachedRecordCount == Self.cap - 4)
        #expect(Self.found(browser.received(Self.response(bob), now: 5000).changes).count == 1)
        #expect(alice.allSatisfy { browser.holds($0) })
    }
}
