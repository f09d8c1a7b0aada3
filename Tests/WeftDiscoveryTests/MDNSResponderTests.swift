import Testing
@testable import WeftDiscovery

@Suite("The mDNS responder, sans I/O: probe, announce, answer, rename on conflict, goodbye (RFC 6762 §8, §10)")
struct MDNSResponderTests {
    static func service(port: UInt16 = 7400, address: [UInt8] = [10, 0, 0, 2], label: String = "alice (3f2a)") -> AdvertisedService {
        try! AdvertisedService(
            instanceLabel: label, hostLabel: "weft-3f2a\(address.last!)", port: port, txt: [Array("v=1".utf8)], addresses: [address])
    }

    /// Runs ticks until it settles, returning every packet with the time it went out.
    static func run(_ responder: inout MDNSResponder, from start: UInt64, until end: UInt64) -> [(UInt64, DNSMessage)] {
        var sent: [(UInt64, DNSMessage)] = []
        var now = start
        while let next = responder.nextTick, next <= end {
            now = next
            sent += responder.tick(now: now).map { (now, $0.0) }
        }
        return sent
    }

    @Test("three probes 250 ms apart, then two announcements a second apart, then quiet")
    func startUp() {
        var responder = MDNSResponder(service: Self.service())
        let first = responder.start(now: 0)
        #expect(first.count == 1)
        let probe = first[0].0
        #expect(!probe.isResponse)
        #expect(probe.questions.map(\.type) == [DNSRecordType.any, DNSRecordType.any])
        #expect(probe.questions.allSatisfy { $0.unicastResponse }, "the first probe asks for unicast answers")
        #expect(Set(probe.authorities.map(\.type)) == [DNSRecordType.srv, DNSRecordType.txt, DNSRecordType.a])
        let rest = Self.run(&responder, from: 0, until: 10_000)
        #expect(rest.map(\.0) == [250, 500, 750, 1750])
        #expect(rest.map(\.1.isResponse) == [false, false, true, true])
        #expect(rest[2].1.answers.map(\.type) == [DNSRecordType.ptr, DNSRecordType.srv, DNSRecordType.txt, DNSRecordType.a])
        #expect(responder.phase == .running)
        #expect(responder.nextTick == nil)
    }

    static func running() -> MDNSResponder {
        var responder = MDNSResponder(service: Self.service())
        _ = responder.start(now: 0)
        _ = Self.run(&responder, from: 0, until: 10_000)
        return responder
    }

    @Test("a browse query gets the PTR, with SRV, TXT and address as additional records; known answers are left out")
    func answers() throws {
        var responder = Self.running()
        let question = DNSQuestion(AdvertisedService.serviceType, type: DNSRecordType.ptr)
        let reply = responder.received(DNSMessage(isResponse: false, questions: [question]), from: .group, now: 20_000)
        #expect(reply.count == 1)
        #expect(reply[0].1 == .group)
        #expect(reply[0].0.answers.map(\.type) == [DNSRecordType.ptr])
        #expect(Set(reply[0].0.additionals.map(\.type)) == [DNSRecordType.srv, DNSRecordType.txt, DNSRecordType.a])

        let ptr = responder.records()[0]
        let knowing = DNSMessage(isResponse: false, questions: [question], answers: [ptr])
        #expect(responder.received(knowing, from: .group, now: 20_000).isEmpty, "the asker knows it with its full TTL")
        var stale = ptr
        stale.ttl = 100
        #expect(responder.received(DNSMessage(isResponse: false, questions: [question], answers: [stale]), from: .group, now: 21_000).count == 1)

        // A question for another name gets nothing.
        let other = DNSQuestion(try DNSName("_http._tcp.local"), type: DNSRecordType.ptr)
        #expect(responder.received(DNSMessage(isResponse: false, questions: [other]), from: .group, now: 20_000).isEmpty)
    }

    @Test("a flood of queries draws one answer per record and destination per second; a probe's defence comes after a quarter second")
    func onceASecond() {
        var responder = Self.running()
        let query = DNSMessage(isResponse: false, questions: [DNSQuestion(AdvertisedService.serviceType, type: DNSRecordType.ptr)])
        var answeredAt: [UInt64] = []
        for now in stride(from: 20_000 as UInt64, to: 23_000, by: 10) where !responder.received(query, from: .group, now: now).isEmpty {
            answeredAt.append(now)
        }
        #expect(answeredAt == [20_000, 21_000, 22_000])
        // A simple resolver elsewhere is its own destination; so is each one.
        let resolver = MDNSDestination.unicast(host: "10.0.0.9", port: 40_000)
        #expect(responder.received(query, from: resolver, now: 22_000).count == 1)
        #expect(responder.received(query, from: resolver, now: 22_100).isEmpty)
        #expect(responder.received(query, from: .unicast(host: "10.0.0.10", port: 40_000), now: 22_100).count == 1)
        // Resolvers without number, within one second: replies stop at 1,024 remembered
        // pairs, while the group is still answered.
        var replied = 0
        for host in 0..<2000 where !responder.received(query, from: .unicast(host: "10.1.\(host / 250).\(host % 250)", port: 40_000), now: 25_000).isEmpty {
            replied += 1
        }
        #expect(replied == MDNSResponder.maxRemembered, "one pair (the PTR) per reply, then none")
        #expect(!responder.received(query, from: .group, now: 25_000).isEmpty)
        // Another host probing for our instance name is answered again after 250 ms.
        let ours = responder.records().filter { $0.name == responder.instanceName }
        let probe = DNSMessage(isResponse: false, questions: [DNSQuestion(responder.instanceName, type: DNSRecordType.any)], authorities: ours)
        #expect(!responder.received(probe, from: .group, now: 30_000).isEmpty)
        #expect(responder.received(probe, from: .group, now: 30_100).isEmpty)
        #expect(!responder.received(probe, from: .group, now: 30_250).isEmpty)
    }

    @Test("a simple resolver on another port is answered by unicast, with its id and questions")
    func legacyUnicast() {
        var responder = Self.running()
        let question = DNSQuestion(responder.hostName, type: DNSRecordType.a)
        let reply = responder.received(DNSMessage(id: 77, isResponse: false, questions: [question]), from: .unicast(host: "10.0.0.9", port: 40_000), now: 20_000)
        #expect(reply.count == 1)
        #expect(reply[0].1 == .unicast(host: "10.0.0.9", port: 40_000))
        #expect(reply[0].0.id == 77)
        #expect(reply[0].0.questions == [question])
        #expect(reply[0].0.answers.map(\.data) == [.a([10, 0, 0, 2])])
    }

    @Test("another host's record for its name renames it (2) and it probes again; its own records echoed are no conflict")
    func conflict() {
        var responder = MDNSResponder(service: Self.service())
        _ = responder.start(now: 0)
        let echo = DNSMessage(isResponse: true, answers: responder.records())
        #expect(responder.received(echo, from: .group, now: 100).isEmpty)
        #expect(responder.attempt == 1)
        let other = DNSMessage(
            isResponse: true,
            answers: [DNSResourceRecord(responder.instanceName, .srv(priority: 0, weight: 0, port: 9999, target: responder.hostName), ttl: 120)])
        let probe = responder.received(other, from: .group, now: 120)
        #expect(responder.attempt == 2)
        #expect(responder.instanceName.labels[0] == Array("alice (3f2a) (2)".utf8))
        #expect(probe.count == 1 && !probe[0].0.isResponse)
        _ = Self.run(&responder, from: 120, until: 10_000)
        #expect(responder.phase == .running)
    }

    @Test("two responders starting with the same name on one group end with two names, both running")
    func twoOnOneGroup() {
        var a = MDNSResponder(service: Self.service(port: 7400, address: [10, 0, 0, 2]))
        var b = MDNSResponder(service: Self.service(port: 7401, address: [10, 0, 0, 3]))
        // One shared clock; every packet reaches the other responder at once.
        var now: UInt64 = 0
        var pending = a.start(now: now).map { ($0.0, 0) } + b.start(now: now).map { ($0.0, 1) }
        for _ in 0..<10_000 {
            for (message, sender) in pending {
                let replies = sender == 0 ? b.received(message, from: .group, now: now) : a.received(message, from: .group, now: now)
                _ = replies  // answers to probes are responses the other side may read as conflicts
            }
            pending = []
            let next = [a.nextTick, b.nextTick].compactMap { $0 }.min()
            guard let next else { break }
            now = next
            pending += a.tick(now: now).map { ($0.0, 0) } + b.tick(now: now).map { ($0.0, 1) }
        }
        #expect(a.phase == .running)
        #expect(b.phase == .running)
        #expect(a.instanceName != b.instanceName)
    }

    @Test("stopping says goodbye: every record once more with TTL 0")
    func goodbye() {
        var responder = Self.running()
        let bye = responder.stop()
        #expect(bye.count == 1)
        #expect(bye[0].0.answers.count == 4)
        #expect(bye[0].0.answers.allSatisfy { $0.ttl == 0 })
        #expect(responder.phase == .stopped)
        #expect(responder.stop().isEmpty)
    }

    @Test("labels fit: an empty or overlong host label is refused; a long instance name is cut to leave room for its rename suffix")
    func labelsFit() throws {
        #expect(throws: DNSMessageError.self) { try AdvertisedService(instanceLabel: "a", hostLabel: String(repeating: "h", count: 64), port: 1, txt: [], addresses: []) }
        #expect(throws: DNSMessageError.self) { try AdvertisedService(instanceLabel: "", hostLabel: "h", port: 1, txt: [], addresses: []) }
        let long = String(repeating: "é", count: 40)
        for attempt in [1, 2, 1234] {
            let label = AdvertisedService.label(long, attempt: attempt)
            #expect(label.utf8.count <= DNSName.maxLabelByteCount)
            #expect(attempt == 1 || label.hasSuffix(" (\(attempt))"))
        }
    }
}
