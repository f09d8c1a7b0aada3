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

    @Test("it asks 20 to 120 ms after start (each browser its own delay), then 1, 2, 4, ... seconds later, up to an hour")
    func schedule() {
        var firsts: Set<UInt64> = []
        for seed in 0..<20 as Range<UInt64> {
            var browser = MDNSBrowser(seed: seed)
            browser.start(now: 0)
            #expect(browser.tick(now: 19).queries.isEmpty)
            var times: [UInt64] = []
            var first: DNSMessage?
            while let next = browser.nextTick, times.count < 14 {
                let queries = browser.tick(now: next).queries
                if !queries.isEmpty { times.append(next) }
                first = first ?? queries.first
            }
            #expect(first?.questions == [DNSQuestion(AdvertisedService.serviceType, type: DNSRecordType.ptr)])
            #expect(MDNSBrowser.firstDelay.contains(times[0]))
            firsts.insert(times[0])
            let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
            #expect(Array(gaps.prefix(4)) == [1000, 2000, 4000, 8000])
            #expect(gaps.max() == MDNSBrowser.maxInterval)
        }
        #expect(firsts.count > 10, "browsers started together ask at different times")
    }

    @Test("an announcement resolves to a node: its port, address and TXT record; a goodbye loses it")
    func foundAndGoodbye() {
        var (responder, announcement) = Self.announced()
        var browser = MDNSBrowser(seed: 1)
        browser.start(now: 0)
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
        var browser = MDNSBrowser(seed: 1)
        browser.start(now: 0)
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
        var browser = MDNSBrowser(seed: 1)
        browser.start(now: 0)
        _ = browser.received(announcement, now: 0)
        var asked: [(UInt64, [DNSQuestion])] = []
        var lost: UInt64?
        while let next = browser.nextTick, next <= 200_000, lost == nil {
            let (queries, changes) = browser.tick(now: next)
            for query in queries where !query.questions.contains(where: { $0.type == DNSRecordType.ptr }) { asked.append((next, query.questions)) }
            if changes.contains(where: { if case .lost = $0 { true } else { false } }) { lost = next }
        }
        // SRV and the address live 120 s: asked for at 80, 85, 90 and 95 % of it, each 0 to
        // 2 % later; lost at 120 s with no answer.
        let srvAsked = asked.filter { $0.1.contains { $0.type == DNSRecordType.srv } }.map(\.0)
        #expect(srvAsked.count == 4, "\(srvAsked)")
        // The SRV and the address came in one packet, so they are asked for in one query.
        #expect(asked.filter { $0.1.contains { $0.type == DNSRecordType.srv } }.allSatisfy { $0.1.contains { $0.type == DNSRecordType.a } })
        for (time, percent) in zip(srvAsked, [80, 85, 90, 95] as [UInt64]) {
            #expect((percent * 1200...(percent + 2) * 1200).contains(time), "\(time) for \(percent) %")
        }
        #expect(lost == 120_000)
    }

    @Test("the node's own names, heard back from the group, are neither kept nor found")
    func ownNames() {
        var (responder, announcement) = Self.announced()
        var browser = MDNSBrowser(seed: 3)
        browser.ownRecords = responder.records()
        browser.start(now: 0)
        #expect(browser.received(announcement, now: 0).changes.isEmpty)
        // Its own PTR alone asks for nothing: its own responder would answer, and the answer
        // would ask again, at the speed of the loopback.
        let ownPTR = announcement.answers.filter { $0.type == DNSRecordType.ptr }
        #expect(browser.received(DNSMessage(isResponse: true, answers: ownPTR), now: 10).queries.isEmpty)
        // Only its periodic PTR queries follow, listing its own PTR as known (so its own
        // responder does not answer them); nothing of its own is asked for again.
        while let next = browser.nextTick, next < 200_000 {
            for query in browser.tick(now: next).queries {
                #expect(query.questions.allSatisfy { $0.type == DNSRecordType.ptr }, "\(query.questions)")
                #expect(query.answers == ownPTR)
                #expect(responder.received(query, from: .group, now: next).isEmpty, "its own responder stays silent")
            }
        }
        #expect(browser.nodes.isEmpty)
    }

    @Test("a resolving question goes out at most once a second, however often incomplete answers come")
    func resolvingRateLimited() {
        let (_, announcement) = Self.announced()
        let ptrOnly = DNSMessage(isResponse: true, answers: announcement.answers.filter { $0.type == DNSRecordType.ptr })
        var browser = MDNSBrowser(seed: 4)
        browser.start(now: 0)
        var asked: [UInt64] = []
        for now in stride(from: 100 as UInt64, through: 3000, by: 50) where !browser.received(ptrOnly, now: now).queries.isEmpty {
            asked.append(now)
        }
        #expect(asked == [100, 1100, 2100], "\(asked)")
    }

    @Test("of browsers holding the same records, the first to refresh asks; the answer refreshes the others, which then do not ask")
    func oneRefreshForAll() {
        let (_, announcement) = Self.announced()
        // Ten LANs of four browsers each (their seeds differ), to see it is not one lucky draw.
        for lan in 0..<10 as Range<UInt64> {
            var browsers = (0..<4 as Range<UInt64>).map { MDNSBrowser(seed: 100 * lan + $0) }
            for index in browsers.indices {
                browsers[index].start(now: 0)
                _ = browsers[index].received(announcement, now: 0)
            }
            // Run them together until 119 s; a refresh question is answered at once, to every
            // browser, as the responder on the group does.
            var asks: [(time: UInt64, askers: [Int])] = []
            while let now = browsers.compactMap(\.nextTick).min(), now < 119_000 {
                var askers: [Int] = []
                for index in browsers.indices {
                    let queries = browsers[index].tick(now: now).queries
                    if queries.contains(where: { $0.questions.contains { $0.type != DNSRecordType.ptr } }) { askers.append(index) }
                }
                guard !askers.isEmpty else { continue }
                asks.append((now, askers))
                for index in browsers.indices { _ = browsers[index].received(announcement, now: now) }
            }
            // One question, from one browser, at 80 to 82 % of the 120 s TTL; not one from each.
            #expect(asks.count == 1 && asks.first?.askers.count == 1, "LAN \(lan): \(asks)")
            #expect((96_000...98_400).contains(asks.first?.time ?? 0))
            #expect(browsers.allSatisfy { $0.nodes.count == 1 }, "still found by all")
        }
    }

    @Test("its periodic query lists the PTRs it holds as known answers; queries and others' TXT are not nodes")
    func knownAnswersAndNoise() throws {
        let (_, announcement) = Self.announced()
        var browser = MDNSBrowser(seed: 1)
        browser.start(now: 0)
        _ = browser.received(announcement, now: 500)
        var query: DNSMessage?
        while let next = browser.nextTick, query == nil { query = browser.tick(now: next).queries.first }
        #expect(query?.answers.map(\.type) == [DNSRecordType.ptr])

        var other = MDNSBrowser(seed: 2)
        other.start(now: 0)
        var foreign = announcement
        foreign.answers = foreign.answers.map { record in
            guard record.type == DNSRecordType.txt else { return record }
            return DNSResourceRecord(record.name, .txt([Array("path=/".utf8)]), ttl: record.ttl, cacheFlush: true)
        }
        #expect(other.received(foreign, now: 100).changes.isEmpty, "a TXT record that names no Weft node")
        #expect(other.received(DNSMessage(isResponse: false, answers: announcement.answers), now: 100).changes.isEmpty, "a query's answers")
    }
}
