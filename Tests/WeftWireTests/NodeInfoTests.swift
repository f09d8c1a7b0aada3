import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

@Suite("NodeInfo")
struct NodeInfoTests {
    static let identity = NodeIdentity(seed: SecureBytes(copying: [UInt8](repeating: 3, count: 32))).publicKey

    static let samples: [NodeInfo] = [
        NodeInfo(identity: identity, displayName: "alice"),
        NodeInfo(identity: identity, displayName: ""),
        NodeInfo(identity: identity, displayName: "Zoë 🧵 ноутбук", protocolVersion: 9, features: 0x0102_0304_0506_0708),
        NodeInfo(identity: identity, displayName: String(repeating: "x", count: 64), features: .max),
    ]

    private func expectMalformed(_ bytes: [UInt8], _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        do throws(WeftWireError) {
            let info = try NodeInfo(bytes: bytes)
            Issue.record("parsed as \(info)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .malformedFrame, comment, sourceLocation: sourceLocation)
        }
    }

    @Test("round trip", arguments: samples)
    func roundTrip(info: NodeInfo) throws {
        let bytes = info.bytes
        #expect(bytes.count == 2 + 8 + 32 + 1 + info.displayName.utf8.count)
        let parsed = try NodeInfo(bytes: bytes)
        #expect(parsed == info)
        #expect(parsed.displayName == info.displayName)
        #expect(parsed.identity == Self.identity)
    }

    @Test("the layout is version, features, key, name (big-endian)")
    func layout() {
        let info = NodeInfo(identity: Self.identity, displayName: "ab", protocolVersion: 0x0102, features: 0x0a0b)
        #expect(info.bytes == [1, 2, 0, 0, 0, 0, 0, 0, 0x0a, 0x0b] + Self.identity.bytes + [2, 0x61, 0x62])
    }

    @Test("every truncation throws", arguments: samples)
    func everyTruncation(info: NodeInfo) {
        let bytes = info.bytes
        for length in 0..<bytes.count {
            expectMalformed(Array(bytes.prefix(length)), "\(length) of \(bytes.count) bytes")
        }
    }

    @Test("the listen port follows the name; one byte after the name, a port of 0, and bytes after the port are ignored")
    func listenPortAndTrailingBytes() throws {
        let info = Self.samples[2]
        #expect(info.listenPort == nil)
        #expect(try NodeInfo(bytes: info.bytes + [0xff]) == info)
        #expect(try NodeInfo(bytes: info.bytes + [0, 0] + Array(repeating: 0xff, count: 300)) == info)
        var listening = info
        listening.listenPort = 7400
        #expect(listening.bytes == info.bytes + [0x1c, 0xe8])
        #expect(try NodeInfo(bytes: listening.bytes + Array(repeating: 0xff, count: 300)) == listening)
    }

    @Test("a display name over 64 bytes is rejected when read")
    func overLongNameRejected() {
        let prefix = Array(Self.samples[0].bytes.prefix(42))
        for length in [65, 100, 255] {
            expectMalformed(prefix + [UInt8(length)] + Array(repeating: 0x61, count: length), "\(length)-byte name")
        }
        // Exactly 64 is fine.
        #expect((try? NodeInfo(bytes: prefix + [64] + Array(repeating: 0x61, count: 64)))?.displayName.count == 64)
    }

    @Test("an over-long name is cut to 64 bytes on a character boundary when built")
    func overLongNameTruncated() throws {
        let ascii = NodeInfo(identity: Self.identity, displayName: String(repeating: "n", count: 100))
        #expect(ascii.displayName == String(repeating: "n", count: 64))
        // "é" is two bytes, "🧵" four: never split one.
        let accents = NodeInfo(identity: Self.identity, displayName: "x" + String(repeating: "é", count: 40))
        #expect(accents.displayName == "x" + String(repeating: "é", count: 31))
        #expect(accents.displayName.utf8.count == 63)
        let emoji = NodeInfo(identity: Self.identity, displayName: "abc" + String(repeating: "🧵", count: 20))
        #expect(emoji.displayName == "abc" + String(repeating: "🧵", count: 15))
        #expect(try NodeInfo(bytes: emoji.bytes) == emoji)
    }

    @Test("invalid UTF-8 in the name is rejected")
    func invalidUTF8() {
        let prefix = Array(Self.samples[0].bytes.prefix(42))
        for name: [UInt8] in [[0xff], [0x61, 0xc3], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]] {
            expectMalformed(prefix + [UInt8(name.count)] + name, "name \(name.hex)")
        }
    }

    /// The parser leaves the point check to the handshake, which converts the key once
    /// (ConnectionRawPeerTests checks the handshake refuses such a peer).
    @Test("a key that is not a usable point parses, and its conversion fails")
    func invalidKey() throws {
        var bytes = Self.samples[0].bytes
        bytes.replaceSubrange(10..<42, with: [UInt8](repeating: 0, count: 32))
        let info = try NodeInfo(bytes: bytes)
        #expect(throws: WeftCryptoError.invalidPublicKey) { try info.identity.agreementPublicKey() }
    }
}
