import Testing
import WeftCrypto
@testable import WeftDiscovery

@Suite("The multicast DNS codec (RFC 1035 §4, RFC 6762 §18): round trips, compression, and hostile packets")
struct DNSMessageTests {
    static func name(_ text: String) -> DNSName { try! DNSName(text) }

    /// An announcement as a Weft node sends one: PTR, SRV, TXT and addresses.
    static let announcement: DNSMessage = {
        let service = name("_weft._tcp.local")
        let instance = try! service.prepending(Array("alice (3f2a)".utf8))
        let host = name("weft-3f2a.local")
        return DNSMessage(
            isResponse: true, isAuthoritative: true,
            answers: [
                DNSResourceRecord(service, .ptr(instance), ttl: 4500),
                DNSResourceRecord(instance, .srv(priority: 0, weight: 0, port: 7400, target: host), ttl: 120, cacheFlush: true),
                DNSResourceRecord(instance, .txt([Array("v=1".utf8), Array("user=weft1abc".utf8), Array("mesh=00ff".utf8)]), ttl: 4500, cacheFlush: true),
            ],
            additionals: [
                DNSResourceRecord(host, .a([10, 0, 0, 2]), ttl: 120, cacheFlush: true),
                DNSResourceRecord(host, .aaaa([0xfd, 0] + [UInt8](repeating: 0, count: 13) + [2]), ttl: 120, cacheFlush: true),
                DNSResourceRecord(host, .nsec(next: host, types: [DNSRecordType.a, DNSRecordType.aaaa]), ttl: 120, cacheFlush: true),
            ])
    }()

    @Test("a query and an announcement decode to what was encoded")
    func roundTrips() throws {
        let query = DNSMessage(
            isResponse: false,
            questions: [DNSQuestion(Self.name("_weft._tcp.local"), type: DNSRecordType.ptr, unicastResponse: true)],
            answers: [DNSResourceRecord(Self.name("_weft._tcp.local"), .ptr(Self.name("bob._weft._tcp.local")), ttl: 4500)])
        for message in [query, Self.announcement] {
            #expect(try DNSMessage(decoding: message.encoded()) == message)
        }
    }

    @Test("names compress: a repeated suffix becomes a two-byte pointer to where it was first written")
    func compression() throws {
        let message = DNSMessage(
            isResponse: false,
            questions: [
                DNSQuestion(Self.name("_weft._tcp.local"), type: DNSRecordType.ptr),
                DNSQuestion(Self.name("alice._weft._tcp.local"), type: DNSRecordType.srv),
            ])
        let bytes = message.encoded()
        // Header (12), then 5 _weft 4 _tcp 5 local 0 (18) and type and class (4); then 5 alice
        // and a pointer to offset 12 (8), type and class (4).
        #expect(bytes.count == 12 + 18 + 4 + 8 + 4)
        #expect(Array(bytes[34..<42]) == [5] + Array("alice".utf8) + [0xc0, 12])
        #expect(try DNSMessage(decoding: bytes) == message)
        // The announcement: every name after the first that ends in "local" is shorter for it,
        // and both forms decode to the same message.
        let compressed = Self.announcement.encoded()
        let plain = Self.announcement.encoded(compressingNames: false)
        #expect(compressed.count < plain.count - 60, "\(compressed.count) against \(plain.count)")
        #expect(try DNSMessage(decoding: plain) == Self.announcement)
    }

    @Test("names compare and compress without regard to ASCII case")
    func caseInsensitive() throws {
        #expect(Self.name("_WEFT._tcp.Local") == Self.name("_weft._tcp.local"))
        let message = DNSMessage(
            isResponse: false,
            questions: [DNSQuestion(Self.name("_weft._tcp.local"), type: 12), DNSQuestion(Self.name("x._WEFT._TCP.LOCAL"), type: 33)])
        // The second name is its own label and a pointer to the first: 1 + 1 + 2 bytes.
        #expect(message.encoded().count == 12 + 18 + 4 + 4 + 4)
    }

    /// A header with the given counts, then `body`.
    static func packet(questions: UInt16 = 0, answers: UInt16 = 0, _ body: [UInt8]) -> [UInt8] {
        [0, 0, 0x84, 0, UInt8(questions >> 8), UInt8(questions & 0xff), UInt8(answers >> 8), UInt8(answers & 0xff), 0, 0, 0, 0] + body
    }

    @Test(
        "hostile packets are refused with a reason, never a crash or a loop",
        arguments: [
            ("a header cut short", [0, 0, 0x84], DNSMessageError.Reason.truncated),
            ("a question counted but missing", packet(questions: 1, []), .truncated),
            ("a label longer than what is left", packet(questions: 1, [10] + Array("abc".utf8)), .truncated),
            ("a pointer to itself", packet(questions: 1, [0xc0, 12, 0, 12, 0, 1]), .badPointer),
            ("a chain of pointers that would come back (a pointer forward)", packet(questions: 2, [1, 0x61, 0xc0, 16, 0, 12, 0, 1, 0xc0, 12, 0, 12, 0, 1]), .badPointer),
            ("a pointer forward, past the end", packet(questions: 1, [0xc3, 0xff, 0, 12, 0, 1]), .badPointer),
            ("a pointer cut in half", packet(questions: 1, [0xc0]), .truncated),
            ("a label kind that is not assigned", packet(questions: 1, [0x40, 0, 0, 12, 0, 1]), .badName),
            ("a name over 255 bytes", packet(questions: 1, Array(repeating: [63] + [UInt8](repeating: 0x61, count: 63), count: 5).flatMap { $0 } + [0, 0, 12, 0, 1]), .badName),
            ("record data longer than the packet", packet(answers: 1, [0, 0, 1, 0, 1, 0, 0, 0, 120, 0, 200, 10, 0, 0, 1]), .truncated),
            ("an A record of 3 bytes", packet(answers: 1, [0, 0, 1, 0, 1, 0, 0, 0, 120, 0, 3, 10, 0, 0]), .badRecord),
            ("a PTR with bytes after its name", packet(answers: 1, [0, 0, 12, 0, 1, 0, 0, 0, 120, 0, 3, 0, 7, 7]), .badRecord),
            ("a TXT string longer than its record", packet(answers: 1, [0, 0, 16, 0, 1, 0, 0, 0, 120, 0, 2, 5, 0x61]), .truncated),
            ("bytes after the last record", packet([0xff]), .badRecord),
        ] as [(String, [UInt8], DNSMessageError.Reason)])
    func hostile(_ what: String, _ bytes: [UInt8], _ reason: DNSMessageError.Reason) {
        #expect(throws: DNSMessageError.self, "\(what)") { try DNSMessage(decoding: bytes) }
        do {
            _ = try DNSMessage(decoding: bytes)
        } catch {
            #expect(error.reason == reason, "\(what): \(error)")
        }
    }

    @Test("every cut and every single-byte change of a real packet decodes or is refused, without a crash")
    func mutations() {
        let bytes = Self.announcement.encoded()
        var refused = 0
        for length in 0..<bytes.count {
            if (try? DNSMessage(decoding: Array(bytes.prefix(length)))) == nil { refused += 1 }
        }
        #expect(refused == bytes.count, "a cut packet decoded")
        var generator = SplitMix64(seed: 6762)
        for index in bytes.indices {
            for _ in 0..<8 {
                var changed = bytes
                changed[index] = UInt8.random(in: 0...255, using: &generator)
                _ = try? DNSMessage(decoding: changed)
            }
        }
        for _ in 0..<2_000 {
            let noise = (0..<Int.random(in: 0...600, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = try? DNSMessage(decoding: noise)
        }
    }
}
