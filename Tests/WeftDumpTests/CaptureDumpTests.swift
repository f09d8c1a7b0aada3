import Testing
import WeftCapture
import WeftCrypto
import WeftDiscovery
import WeftDump

/// Cuts a connection's two streams into TCP segments (with SYNs) as Ethernet frames, the
/// sides' segments interleaved as they would cross.
func frames(of connection: RecordedConnection, from client: Endpoint, to server: Endpoint) -> [[UInt8]] {
    var frames = [
        CaptureBuilder.tcp(from: client, to: server, sequence: 100, flags: .syn),
        CaptureBuilder.tcp(from: server, to: client, sequence: 900, acknowledgement: 101, flags: [.syn, .ack]),
    ]
    var offsets = (client: 0, server: 0)
    let (sent, received) = (connection.sent.initiator, connection.sent.responder)
    while offsets.client < sent.count || offsets.server < received.count {
        if offsets.client < sent.count {
            let end = min(sent.count, offsets.client + 1_000)
            frames.append(CaptureBuilder.tcp(from: client, to: server, sequence: 101 + UInt32(offsets.client), payload: Array(sent[offsets.client..<end])))
            offsets.client = end
        }
        if offsets.server < received.count {
            let end = min(received.count, offsets.server + 700)
            frames.append(CaptureBuilder.tcp(from: server, to: client, sequence: 901 + UInt32(offsets.server), payload: Array(received[offsets.server..<end])))
            offsets.server = end
        }
    }
    return frames
}

@Suite("weft dump over a capture file: Weft connections, mDNS, and what is not Weft's")
struct CaptureDumpTests {
    @Test("a capture with a Weft connection, another TCP connection and an mDNS announcement: the connection decoded, the other left out, the announcement read as the Weft service it advertises")
    func mixedCapture() throws {
        let (connection, operations) = try ConnectionDecoderTests.recorded()
        let node = Endpoint(address: IPAddress([127, 0, 0, 1]), port: 7_000)
        let peer = Endpoint(address: IPAddress([127, 0, 0, 1]), port: 51_000)
        let web = [
            CaptureBuilder.tcp(from: Endpoint(address: IPAddress([127, 0, 0, 1]), port: 52_000), to: Endpoint(address: IPAddress([127, 0, 0, 1]), port: 80), sequence: 1, flags: .syn),
            CaptureBuilder.tcp(from: Endpoint(address: IPAddress([127, 0, 0, 1]), port: 52_000), to: Endpoint(address: IPAddress([127, 0, 0, 1]), port: 80), sequence: 2, payload: Array("GET / HTTP/1.1\r\n\r\n".utf8)),
        ]
        let user = connection.identities.responder.publicKey
        let service = AdvertisedService(displayName: "bob", user: user, meshTag: Array(1...16), port: 7_000, addresses: [[127, 0, 0, 1]])
        let announcement = DNSMessage(isResponse: true, isAuthoritative: true, answers: MDNSResponder(service: service).records()).encoded()
        let mdns = CaptureBuilder.udp(
            from: Endpoint(address: IPAddress([127, 0, 0, 1]), port: 5353), to: Endpoint(address: IPAddress([224, 0, 0, 251]), port: 5353),
            payload: announcement)
        let capture = CaptureBuilder.pcapng(web + [mdns] + frames(of: connection, from: peer, to: node))

        let dump = CaptureDump(keys: connection.keys.entries)
        var records: [DumpRecord] = []
        for start in stride(from: 0, to: capture.count, by: 4_096) {
            records += dump.feed(capture[start..<min(capture.count, start + 4_096)])
        }
        records += dump.finish()
        #expect(Set(records.map(\.connection)) == [0, 1], "the web connection is not numbered")
        let opened = try #require(records.first { $0.kind == "connection" })
        #expect(opened["initiator"] == .string("127.0.0.1:51000") && opened["responder"] == .string("127.0.0.1:7000"))
        let ids = records.flatMap { record -> [String] in
            guard case .list(let list)? = record["operations"] else { return [] }
            return list.compactMap { if case .object(let fields) = $0, case .string(let id)? = fields.first?.value { id } else { nil } }
        }
        #expect(ids == operations.map(\.id.hex))

        let announced = try #require(records.first { $0.kind == "mdns" })
        #expect(announced["response"] == .bool(true))
        guard case .list(let answers)? = announced["records"] else { Issue.record("no records in \(announced.text)"); return }
        #expect(answers.contains { value in
            guard case .object(let fields) = value else { return false }
            return fields.contains(DumpField("weftUser", .string("\(user)"))) && fields.contains(DumpField("meshTag", .string("0102030405060708090a0b0c0d0e0f10")))
        }, "\(announced.text)")
    }

    @Test("filters: by connection, by frame or message type, by conversation")
    func filters() throws {
        let (connection, operations) = try ConnectionDecoderTests.recorded()
        let capture = CaptureBuilder.pcap(frames(of: connection, from: CaptureBuilder.alice, to: CaptureBuilder.bob))
        func run(_ configure: (inout DumpFilter) -> Void) -> [DumpRecord] {
            var filter = DumpFilter()
            configure(&filter)
            let dump = CaptureDump(keys: connection.keys.entries, filter: filter)
            return dump.feed(capture) + dump.finish()
        }
        let all = run { _ in }
        #expect(run { $0.connections = [2] }.isEmpty)
        let operationFrames = run { $0.types = ["OPERATIONS"] }.filter { $0.kind == "frame" }
        #expect(operationFrames.count == 2 && operationFrames.count < all.filter { $0.kind == "frame" }.count)
        let conversation = operations[1].operation.conversation.hex
        let named = run { $0.conversations = [conversation] }.filter { $0.kind == "frame" }
        #expect(named.count == 1 && named.first?["push"] == .bool(false), "the second OPERATIONS holds it")
    }
}

@Suite("weft dump never crashes on damaged captures")
struct DamagedCaptureTests {
    @Test("captures with random bytes flipped, cut, or repeated, fed in random pieces: records and problems, never a trap; every problem's offset lies in the file")
    func mutatedCaptures() throws {
        let (connection, _) = try ConnectionDecoderTests.recorded()
        let originals = [
            CaptureBuilder.pcap(frames(of: connection, from: CaptureBuilder.alice, to: CaptureBuilder.bob)),
            CaptureBuilder.pcapng(frames(of: connection, from: CaptureBuilder.alice, to: CaptureBuilder.bob)),
        ]
        var generator = SplitMix64(seed: 77)
        for round in 0..<400 {
            var bytes = originals[round % 2]
            switch generator.next() % 4 {
            case 0:  // flipped bytes
                for _ in 0..<(1 + generator.next() % 8) { bytes[Int(generator.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: generator.next() | 1) }
            case 1:  // cut
                bytes = Array(bytes.prefix(Int(generator.next() % UInt64(bytes.count))))
            case 2:  // a piece repeated elsewhere
                let start = Int(generator.next() % UInt64(bytes.count)), count = Int(generator.next() % 300)
                bytes.insert(contentsOf: bytes[start..<min(bytes.count, start + count)], at: Int(generator.next() % UInt64(bytes.count)))
            default:  // a length field made huge
                let at = Int(generator.next() % UInt64(bytes.count - 4))
                bytes.replaceSubrange(at..<(at + 4), with: [0x7f, 0xff, 0xff, 0xff])
            }
            let dump = CaptureDump(keys: round % 3 == 0 ? [:] : connection.keys.entries)
            var records: [DumpRecord] = []
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + 1 + Int(generator.next() % 5_000))
                records += dump.feed(bytes[offset..<end])
                offset = end
            }
            records += dump.finish()
            for problem in records where problem.kind == "problem" && problem.connection == 0 {
                #expect(problem.offset <= UInt64(bytes.count), "round \(round): \(problem.text)")
            }
        }
    }
}
