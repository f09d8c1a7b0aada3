import Foundation
import Testing
import WeftControl
import WeftDiscovery
import WeftNode

/// LAN discovery (issue 8, SPEC.md §16) between real `weft node` processes, each in a network
/// namespace of its own on a bridged LAN of namespaces, with real multicast that never leaves
/// the bridge. No `--peer` anywhere: the nodes find each other.
@Suite(
    "LAN discovery on a LAN of network namespaces", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: NamespaceLAN.unavailable == nil, "\(NamespaceLAN.unavailable ?? "")"))
struct LANDiscoveryTests {
    @Test("four nodes of a mesh find and connect to each other, and a message reaches all; a fifth of another mesh is seen, never dialed")
    func fourNodesAndAStranger() async throws {
        let lan = try NamespaceLAN(nodes: 5)
        defer { lan.remove() }
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        var mesh = [alice]
        for name in ["bob", "carol", "dave"] { mesh.append(try await RunningNode(dir, name, meshKeyFrom: alice)) }
        let eve = try await RunningNode(dir, "eve")
        for (index, node) in (mesh + [eve]).enumerated() {
            try await node.startDiscovering(on: lan, in: index + 1)
        }

        try await eventually("every pair of the four is connected", seconds: 30) {
            try await connectedInPairs(mesh)
        }
        let status = try #require(try await alice.json("status") as? [String: Any])
        #expect(status["discovery"] as? Bool == true && status["discoveryInterfaces"] as? [String] == ["eth0"])
        #expect(try await alice.ok("status").contains("LAN discovery: on, eth0"))
        // Each pair's one connection was dialed by discovery on one side.
        var origins: [String: [String: String]] = [:]
        for node in mesh { origins[node.name] = try await peerOrigins(node) }
        for node in mesh {
            for other in mesh where other !== node {
                let here = origins[node.name]?[other.name], there = origins[other.name]?[node.name]
                #expect([here, there].contains("discovered") && [here, there].contains("inbound"), "\(node.name)–\(other.name): \(here ?? "-"), \(there ?? "-")")
            }
        }

        // A message sent on one arrives on all.
        var users: [String] = []
        for node in mesh.dropFirst() { users.append(try await node.userID()) }
        let conversation = try await alice.ok("conv new", arguments: users)
        let message = try await alice.ok("send", arguments: [conversation, "--text", "found you all"])
        for node in mesh.dropFirst() {
            // `wait` polls the node itself: until the message arrives, the conversation may not
            // exist there, and `msgs` would be refused.
            #expect(try await node.run(["wait", message], ["--timeout", "30"]).status == 0, "\(node.name) has alice's message")
            let messages = try #require(try await node.json("msgs", arguments: [conversation]) as? [[String: Any]])
            #expect(messages.contains { $0["id"] as? String == message })
        }

        // Eve is seen by all and dialed by none: no connection to or from her, ever.
        #expect(try await peerOrigins(eve).isEmpty)
        for node in mesh { #expect(try await peerOrigins(node)[eve.name] == nil) }
        for node in mesh { #expect(try await node.stop() == 0) }
        #expect(try await eve.stop() == 0)
        for node in mesh + [eve] {
            // A few seconds of discovery: probes, announcements, the first queries, answers to
            // the others' and a goodbye, about 20 packets; a node that answers its own
            // questions in a loop would send thousands.
            let sent = (node.process?.stderr ?? "").split(separator: "\n").first { $0.contains("discovery stopped: ") }
                .flatMap { Int($0.split(separator: "discovery stopped: ").last?.split(separator: " ").first ?? "") }
            #expect((1...60).contains(sent ?? 0), "\(node.name) sent \(sent.map(String.init) ?? "?") discovery packets")
        }
        for node in mesh {
            let log = node.process?.stderr ?? ""
            #expect(log.contains("eve (") && log.contains("is a node of another mesh; not dialing it"), "\(node.name) saw eve")
            #expect(alarming(log).isEmpty, "\(node.name) logged: \(alarming(log))")
        }
        let eveLog = eve.process?.stderr ?? ""
        #expect(!eveLog.contains("connection closed") && !eveLog.contains("peer authenticated"), "eve: \(eveLog)")
        #expect(alarming(eveLog).isEmpty, "eve logged: \(alarming(eveLog))")
    }

    @Test("a node stopped with SIGTERM says goodbye and leaves the others' peers at once; restarted, it is found again")
    func goodbyeAndReturn() async throws {
        let lan = try NamespaceLAN(nodes: 3)
        defer { lan.remove() }
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        let carol = try await RunningNode(dir, "carol", meshKeyFrom: alice)
        let mesh = [alice, bob, carol]
        for (index, node) in mesh.enumerated() {
            try await node.startDiscovering(on: lan, in: index + 1)
        }
        try await eventually("all connected", seconds: 30) { try await connectedInPairs(mesh) }

        let carolPort = try #require(carol.address.split(separator: ":").last)
        // Connected is not yet found: a pair connects once either side found the other, so
        // alice may still be resolving carol when carol's connection to her is up, and a node
        // she never found is nothing to forget.
        for node in [alice, bob] {
            try await eventually("\(node.name) finds carol", seconds: 30) {
                (node.process?.stderr ?? "").contains("at \(lan.address(3)):\(carolPort); dialing it")
            }
        }
        let carolStatus = try await carol.stop()
        #expect(carolStatus == 0, "carol exited with \(carolStatus): \((carol.process?.stderr ?? "").suffix(1500))")
        // The goodbye, not the records' expiry (120 s and more) nor the closed connection,
        // makes the others stop dialing her: they say she left the LAN.
        for node in [alice, bob] {
            do {
                try await eventually("\(node.name) forgets carol's address", seconds: 10) {
                    (node.process?.stderr ?? "").contains("the node at \(lan.address(3)):\(carolPort) left the LAN")
                }
            } catch {
                let discoveryLines = { (log: String) in log.split(separator: "\n").filter { $0.contains("discover") || $0.contains("mDNS") || $0.contains("LAN") }.joined(separator: "\n") }
                Issue.record("\(node.name):\n\(discoveryLines(node.process?.stderr ?? ""))\ncarol:\n\(discoveryLines(carol.process?.stderr ?? ""))")
                throw error
            }
            #expect(try await peerOrigins(node)[carol.name] == nil)
        }

        try await carol.startDiscovering(on: lan, in: 3)
        try await eventually("carol found again", seconds: 30) { try await connectedInPairs(mesh) }
        for node in mesh { #expect(try await node.stop() == 0) }
    }

    @Test(
        "avahi-daemon in a namespace lists every node with address, port and TXT; Weft nodes beside it still find each other",
        .enabled(if: AvahiDaemon.unavailable == nil, "\(AvahiDaemon.unavailable ?? "")"))
    func avahiSeesWeft() async throws {
        let lan = try NamespaceLAN(nodes: 2)
        defer { lan.remove() }
        let dir = try TemporaryDirectory()
        // Avahi first: it holds port 5353 in namespace 1 before any Weft node binds it.
        let avahi = try await AvahiDaemon(namespace: lan.namespace(1), directory: dir)
        defer { avahi.stop() }
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        let carol = try await RunningNode(dir, "carol", meshKeyFrom: alice)
        let mesh = [alice, bob, carol]
        // Alice and bob share avahi's namespace (and its port); carol is across the bridge.
        try await alice.startDiscovering(on: lan, in: 1)
        try await bob.startDiscovering(on: lan, in: 1)
        try await carol.startDiscovering(on: lan, in: 2)
        try await eventually("all connected beside avahi", seconds: 30) { try await connectedInPairs(mesh) }

        let expected = try await Dictionary(uniqueKeysWithValues: [(alice, 1), (bob, 1), (carol, 2)].asyncMap { node, namespace in
            (node.name, (address: lan.address(namespace), port: String(node.address.split(separator: ":").last ?? ""), user: try await node.userID()))
        })
        var listed: [String: [String]] = [:]
        try await eventually("avahi-browse resolves every node", seconds: 30) {
            listed = [:]
            for line in try await avahi.browse(["-rpt", "_weft._tcp"]).split(separator: "\n") where line.hasPrefix("=;") {
                let fields = line.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
                guard fields.count >= 10 else { continue }
                let instance = avahiUnescaped(fields[3])
                listed[String(instance.prefix { $0 != " " })] = fields
            }
            return Set(listed.keys) == Set(expected.keys)
        }
        for (name, node) in expected {
            let fields = try #require(listed[name])
            #expect(fields[4] == "_weft._tcp" && fields[5] == "local")
            #expect(fields[6].hasPrefix("weft-") && fields[6].hasSuffix(".local"))
            #expect(fields[7] == node.address, "\(name)'s address")
            #expect(fields[8] == node.port, "\(name)'s port")
            #expect(fields[9].contains("\"v=1\"") && fields[9].contains("\"user=\(node.user)\"") && fields[9].contains("\"mesh="), "\(name)'s TXT: \(fields[9])")
        }
        for node in mesh { #expect(try await node.stop() == 0) }
        #expect(!avahi.log.contains("Failed to create server") && !avahi.log.lowercased().contains("error"), "avahi: \(avahi.log)")
    }

    @Test("garbage and hostile mDNS packets to the group: the node stays up, keeps answering, and a node started after finds it")
    func hostilePackets() async throws {
        let lan = try NamespaceLAN(nodes: 3)
        defer { lan.remove() }
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.startDiscovering(on: lan, in: 1)
        let probe = try MulticastProbe(namespace: lan.namespace(3), interfaceAddress: lan.address(3))

        let packets = hostileMDNSPackets()
        for packet in packets { probe.send(packet) }
        // Still advertising: a question for the service type gets alice's answer.
        let query = DNSMessage(isResponse: false, questions: [DNSQuestion(AdvertisedService.serviceType, type: DNSRecordType.ptr)])
        var answered = false
        let deadline = ContinuousClock.now + .seconds(20)
        while !answered, ContinuousClock.now < deadline {
            probe.send(query.encoded())
            // At most 100 packets per question: a flood must not hold the test past its deadline.
            for _ in 0..<100 {
                guard let reply = probe.receive(milliseconds: 500) else { break }
                guard let message = try? DNSMessage(decoding: reply), message.isResponse else { continue }
                answered = message.answers.contains { record in
                    if case .ptr(let instance) = record.data { "\(instance)".hasPrefix("alice (") } else { false }
                }
                if answered { break }
            }
        }
        #expect(answered, "alice answers after \(packets.count) hostile packets")
        // She counted them: at least the 30 shorter than a DNS header, and every cut query.
        let malformed = try await discoveryCounters(alice)["discoveryPacketsMalformed"] ?? 0
        #expect(malformed >= UInt64(30 + query.encoded().count - 1), "\(malformed) counted malformed")

        // A flood of valid queries draws an answer per second, not one per query.
        for _ in 0..<100 { guard probe.receive(milliseconds: 1100) != nil else { break } }  // a quiet second first
        for _ in 0..<1000 { probe.send(query.encoded()) }
        var answers = 0
        for _ in 0..<5000 {
            guard let packet = probe.receive(milliseconds: 500) else { break }
            if let message = try? DNSMessage(decoding: packet), message.isResponse { answers += 1 }
        }
        // One answer per second while she works through the burst (well under a second
        // here; up to a few seconds on a loaded machine): a handful, not a thousand.
        #expect((1...5).contains(answers), "alice answered 1,000 queries in a burst \(answers) times")

        try await bob.startDiscovering(on: lan, in: 2)
        try await eventually("bob finds alice", seconds: 30) { try await connectedInPairs([alice, bob]) }
        #expect(try await bob.stop() == 0)
        #expect(try await alice.stop() == 0, "alice stayed up")
        let log = alice.process?.stderr ?? ""
        let rejected = log.split(separator: "\n").first { $0.contains("discovery stopped:") }
        #expect(rejected.map { !$0.contains(" 0 of them malformed") } == true, "alice counted the malformed packets: \(rejected ?? "")")
        #expect(alarming(log).isEmpty, "alice logged: \(alarming(log))")
    }
}

extension LANDiscoveryTests {
    @Test("another responder that claims a node's instance name while it probes: the node renames itself \"name (2)\" and advertises that")
    func nameConflict() async throws {
        let lan = try NamespaceLAN(nodes: 2)
        defer { lan.remove() }
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let rival = try MulticastProbe(namespace: lan.namespace(2), interfaceAddress: lan.address(2))
        try await alice.startDiscovering(on: lan, in: 1)

        // Alice's first probe names her instance; the rival answers that it holds the name.
        var claimed: DNSName?
        let deadline = ContinuousClock.now + .seconds(20)
        while claimed == nil, ContinuousClock.now < deadline {
            guard let packet = rival.receive(milliseconds: 200), let probe = try? DNSMessage(decoding: packet), !probe.isResponse
            else { continue }
            claimed = probe.authorities.first { $0.type == DNSRecordType.srv && "\($0.name)".hasPrefix("alice (") }?.name
        }
        let name = try #require(claimed, "alice probed")
        let rivalHost = try DNSName("rival.local")
        rival.send(DNSMessage(
            isResponse: true, isAuthoritative: true,
            answers: [DNSResourceRecord(name, .srv(priority: 0, weight: 0, port: 9, target: rivalHost), ttl: 120, cacheFlush: true)]
        ).encoded())

        // She now advertises "alice (tag) (2)", and answers for it.
        let renamed = String(decoding: name.labels[0], as: UTF8.self) + " (2)"
        var advertised: [String] = []
        try await eventually("alice answers with her new name", seconds: 20) {
            rival.send(DNSMessage(isResponse: false, questions: [DNSQuestion(AdvertisedService.serviceType, type: DNSRecordType.ptr)]).encoded())
            for _ in 0..<100 {
                guard let packet = rival.receive(milliseconds: 300) else { break }
                guard let reply = try? DNSMessage(decoding: packet), reply.isResponse else { continue }
                for case .ptr(let instance) in reply.answers.map(\.data) {
                    advertised.append(String(decoding: instance.labels[0], as: UTF8.self))
                }
            }
            return advertised.contains(renamed)
        }
        #expect(!advertised.contains(String(decoding: name.labels[0], as: UTF8.self)), "the old name is no longer answered for")
        #expect(try await alice.stop() == 0)
        let log = alice.process?.stderr ?? ""
        #expect(log.contains("advertising as \(renamed)._weft._tcp.local"), "\(log)")
    }
}

extension RunningNode {
    /// Starts `weft node` in namespace `index` of `lan`, listening on all its addresses at a
    /// free port (which discovery advertises), with discovery on.
    func startDiscovering(on lan: NamespaceLAN, in index: Int) async throws {
        try await start(listen: "0.0.0.0:0", namespace: lan.namespace(index), discovery: true)
    }
}

/// The node's discovery counters, from STATISTICS on its control socket (SPEC.md §15.5).
private func discoveryCounters(_ node: RunningNode) async throws -> [String: UInt64] {
    let response = try await ControlClient.withConnection(socketPath: "\(node.home)/control.sock") { try await $0.request(.statistics) }
    guard case .statistics(let counters) = response else { return [:] }
    return Dictionary(counters.filter { $0.name.hasPrefix("discovery") }.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
}

/// Whether every node lists every other (by display name) in `weft peers`.
private func connectedInPairs(_ nodes: [RunningNode]) async throws -> Bool {
    for node in nodes {
        let names = Set(try await peerOrigins(node).keys)
        guard names == Set(nodes.filter { $0 !== node }.map(\.name)) else { return false }
    }
    return true
}

/// Display name to origin (`discovered`, `inbound`, ...) of each peer a node lists.
private func peerOrigins(_ node: RunningNode) async throws -> [String: String] {
    let peers = try await node.json("peers") as? [[String: Any]] ?? []
    return Dictionary(
        peers.compactMap { peer in (peer["displayName"] as? String).map { ($0, peer["origin"] as? String ?? "") } },
        uniquingKeysWith: { first, _ in first })
}

/// Log lines at warning level or above, but the notice of an unprotected identity key (the
/// tests' homes are made with --no-passphrase).
private func alarming(_ log: String) -> [Substring] {
    log.split(separator: "\n").filter { line in
        let words = line.split(separator: " ", maxSplits: 2)
        return words.count > 1 && ["warning", "error", "critical"].contains(words[1]) && !line.contains("stored unprotected")
    }
}

/// avahi-browse -p writes a name's special characters as \DDD (decimal).
private func avahiUnescaped(_ text: String) -> String {
    var bytes: [UInt8] = []
    var rest = Substring(text).utf8[...]
    while let byte = rest.first {
        if byte == UInt8(ascii: "\\"), rest.count >= 4, let value = UInt8(String(decoding: rest.dropFirst().prefix(3), as: UTF8.self)) {
            bytes.append(value)
            rest = rest.dropFirst(4)
        } else {
            bytes.append(byte)
            rest = rest.dropFirst()
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Packets no responder should choke on: random bytes, valid packets cut short, a name whose
/// compression pointer points at itself, and lengths and counts past the end.
private func hostileMDNSPackets() -> [[UInt8]] {
    var generator = SystemRandomNumberGenerator()
    var packets: [[UInt8]] = []
    for length in [0, 1, 11, 12, 13, 40, 300, 1400, 8000] {
        for _ in 0..<10 { packets.append((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }) }
    }
    let query = DNSMessage(isResponse: false, questions: [DNSQuestion(AdvertisedService.serviceType, type: DNSRecordType.ptr)]).encoded()
    for cut in 1..<query.count { packets.append(Array(query.prefix(cut))) }
    let header: [UInt8] = [0, 0, 0x84, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    packets.append(header + [0xC0, 12, 0, 12, 0, 1])  // a question whose name points at itself
    packets.append([0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0] + [0xC0, 12, 0, 12, 0, 1, 0, 0, 0, 120, 0, 2, 0xC0, 12])  // a PTR to its own loop
    packets.append([0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0] + [4] + Array("weft".utf8) + [0, 0, 16, 0, 1, 0, 0, 0, 120, 0xFF, 0xFF, 1, 2])  // rdlength past the end
    packets.append([0, 0, 0x84, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])  // counts with nothing behind them
    packets.append(header + [63] + [UInt8](repeating: 0x61, count: 10))  // a label longer than what follows
    return packets
}

extension Array {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
