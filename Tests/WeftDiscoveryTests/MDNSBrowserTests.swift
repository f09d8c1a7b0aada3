import Testing
import WeftCrypto
@testable import WeftDiscovery

@Suite("The mDNS browser, sans I/O: queries at growing intervals, resolving, refreshing, goodbyes and expiry")
struct MDNSBrowserTests {
    static let user = NodeIdentity.generate().publicKey
    static let tag = MeshKey.generate().tag

    /// A responder for a Weft node, run until it announces; returns it and its announcement.
    static func announced(port: UInt16 = 7400) -> (MDNSResponder, DNSMessage) {
        let txt = WeftServiceRecord(user: user, meshTag: tag).txtStrings
        var responder = MDNSResponder(service: try! AdvertisedService(
            instanceLabel: "alice (3f2a)", hostLabel: "weft-3f2a0001", port: port, txt: txt, addresses: [[10, 0, 0, 2]]))
        _ = responder.start(now: 0)
        var announcement: DNSMessage?
        while let next = responder.nextTick, announcement == nil {
            announcement = responder.tick(now: next).first { $0.0.isResponse }?.0
        }
        return (responder, announcement!)
    }

    @Test("it asks at once, then after 1, 2, 4, ... seconds, up to an hour")
    func schedule() {
        var browser = MDNSBrowser()
        let first = browser.start(now: 0)
        #expect(first.count == 1)
        #expect(first[0].questions == [DNSQuestion(AdvertisedService.serviceType, type: DNSRecordType.ptr)])
        var times: [UInt64] = []
        while let next = browser.nextTick, times.count < 14 {
            if !browser.tick(now: next).queries.isEmpty { times.append(next) }
        }
        #expect(Array(times.prefix(5)) == [1000, 3000, 7000, 15_000, 31_000])
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.max() == MDNSBrowser.maxInterval)
    }

    @Test("an announcement resolves to a node: its port, address and TXT record; a goodbye loses it")
    func foundAndGoodbye() {
        var (responder, announcement) = Self.announced()
        var browser = MDNSBrowser()
        _ = browser.start(now: 0)
        let changes = browser.received(announcement, now: 2000).changes
        guard case .found(let node) = changes.first, changes.count == 1 else {
            Issue.record("not found: \(changes)")
            return
        }
        #expect(node.port == 7400)
        #expect(node.addresses == [[10, 0, 0, 2]])
        #expect(node.record == WeftServiceRecord(user: Self.user, meshTag: Self.tag))
        #expect(node.instance == responder.instanceName)
        // The same announcement again changes nothing.
        #expect(browser.received(announcement, now: 3000).changes.isEmpty)
        let bye = responder.stop()[0].0
        #expect(browser.received(bye, now: 4000).changes == [.lost(instance: node.instance)])
        #expect(browser.nodes.isEmpty)
    }

    @Test("a PTR alone makes it ask for SRV and TXT, then for the address; found once all are there")
    func resolvesStepByStep() throws {
        let (responder, announcement) = Self.announced()
        let records = announcement.answers
        var browser = MDNSBrowser()
        _ = browser.start(now: 0)
        let ptrOnly = browser.received(DNSMessage(isResponse: true, answers: records.filter { $0.type == DNSRecordType.ptr }), now: 100)
        #expect(ptrOnly.changes.isEmpty)
        #expect(Set(ptrOnly.queries.flatMap(\.questions).map(\.type)) == [DNSRecordType.srv, DNSRecordType.txt])
        let withoutAddress = browser.received(
            DNSMessage(isResponse: true, answers: records.filter { $0.type == DNSRecordType.srv || $0.type == DNSRecordType.txt }), now: 200)
        #expect(withoutAddress.changes.isEmpty)
        #expect(withoutAddress.queries.flatMap(\.questions).map(\.name).allSatisfy { $0 == responder.hostName })
        let found = browser.received(DNSMessage(isResponse: true, answers: records.filter { $0.type == DNSRecordType.a }), now: 300)
        #expect(found.changes.count == 1)
    }

    @Test("records near expiry are asked for again; a node that stops answering is lost when they expire")
    func refreshAndExpiry() {
        let (_, announcement) = Self.announced()
        var browser = MDNSBrowser()
        _ = browser.start(now: 0)
        _ = browser.received(announcement, now: 0)
        var asked: [(UInt64, [DNSQuestion])] = []
        var lost: UInt64?
        while let next = browser.nextTick, next <= 200_000, lost == nil {
            let (queries, changes) = browser.tick(now: next)
            for query in queries where !query.questions.contains(where: { $0.type == DNSRecordType.ptr }) { asked.append((next, query.questions)) }
            if changes.contains(where: { if case .lost = $0 { true } else { false } }) { lost = next }
        }
        // SRV and the address live 120 s: asked for at 96 s, lost at 120 s with no answer.
        #expect(asked.contains { $0.0 == 96_000 && $0.1.contains { $0.type == DNSRecordType.srv } })
        #expect(lost == 120_000)
    }

    @Test("its periodic query lists the PTRs it holds as known answers; queries and others' TXT are not nodes")
    func knownAnswersAndNoise() throws {
        let (_, announcement) = Self.announced()
        var browser = MDNSBrowser()
        _ = browser.start(now: 0)
        _ = browser.received(announcement, now: 500)
        var query: DNSMessage?
        while let next = browser.nextTick, query == nil { query = browser.tick(now: next).queries.first }
        #expect(query?.answers.map(\.type) == [DNSRecordType.ptr])

        var other = MDNSBrowser()
        _ = other.start(now: 0)
        var foreign = announcement
        foreign.answers = foreign.answers.map { record in
            guard record.type == DNSRecordType.txt else { return record }
            return DNSResourceRecord(record.name, .txt([Array("path=/".utf8)]), ttl: record.ttl, cacheFlush: true)
        }
        #expect(other.received(foreign, now: 100).changes.isEmpty, "a TXT record that names no Weft node")
        #expect(other.received(DNSMessage(isResponse: false, answers: announcement.answers), now: 100).changes.isEmpty, "a query's answers")
    }
}
