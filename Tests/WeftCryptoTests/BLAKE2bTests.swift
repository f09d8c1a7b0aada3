import Testing
@testable import WeftCrypto

@Suite("BLAKE2b, HMAC and HKDF")
struct BLAKE2bTests {
    /// BLAKE2b-512 known answers (RFC 7693 Appendix A for "abc"; the reference implementation
    /// for the empty string).
    static let knownAnswers: [(input: String, digest: String)] = [
        ("", "786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419"
            + "d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce"),
        ("abc", "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
            + "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923"),
    ]

    @Test("BLAKE2b-512 known answers", arguments: knownAnswers)
    func knownAnswer(input: String, digest: String) {
        #expect(BLAKE2b.hash(Array(input.utf8)).hex == digest)
        let hasher = BLAKE2b.Hasher()
        hasher.update(Array(input.utf8))
        #expect(hasher.finalize().hex == digest)
    }

    @Test("hashing parts equals hashing their concatenation")
    func partsAreConcatenated() {
        let a: [UInt8] = Array("hello, ".utf8)
        let b: [UInt8] = Array("world".utf8)
        #expect(BLAKE2b.hash(a, b) == BLAKE2b.hash(a + b))
        #expect(BLAKE2b.hash(a, [], b) == BLAKE2b.hash(a + b))
        #expect(BLAKE2b.hash(a, b) != BLAKE2b.hash(b, a))
    }

    @Test("output length is honoured and is not a truncation of the 64-byte hash", arguments: [1, 4, 16, 32, 64])
    func outputLength(count: Int) {
        let input = Array("weft".utf8)
        let digest = BLAKE2b.hash(input, outputByteCount: count)
        #expect(digest.count == count)
        if count < 64 {
            // BLAKE2b mixes the output length into its parameter block.
            #expect(digest != Array(BLAKE2b.hash(input).prefix(count)))
        }
    }

    @Test("the incremental hasher equals the one-shot hash, however the input is split")
    func incrementalEqualsOneShot() {
        let input = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        for outputCount in [16, 64] {
            let expected = BLAKE2b.hash(input, outputByteCount: outputCount)
            for chunk in [1, 7, 64, 127, 128, 129, 500, 1000] {
                let hasher = BLAKE2b.Hasher(outputByteCount: outputCount)
                var start = 0
                while start < input.count {
                    let end = min(start + chunk, input.count)
                    hasher.update(input[start..<end])
                    start = end
                }
                hasher.update([UInt8]())  // empty updates change nothing
                #expect(hasher.finalize() == expected, "chunks of \(chunk), \(outputCount)-byte output")
            }
        }
    }

    @Test("HKDF makes two or three distinct 64-byte outputs; the first two do not depend on the count")
    func hkdfOutputs() {
        let chainingKey = SecureBytes(copying: [UInt8](repeating: 0x11, count: 64))
        let ikm: [UInt8] = Array("input key material".utf8)
        let two = BLAKE2b.hkdf(chainingKey: chainingKey, inputKeyMaterial: ikm, outputs: 2)
        let three = BLAKE2b.hkdf(chainingKey: chainingKey, inputKeyMaterial: ikm, outputs: 3)
        #expect(two.count == 2)
        #expect(three.count == 3)
        #expect((two + three).allSatisfy { $0.count == BLAKE2b.outputByteCount })
        #expect(two[0] == three[0])
        #expect(two[1] == three[1])
        #expect(three[0] != three[1] && three[1] != three[2] && three[0] != three[2])

        // Noise §4.3: output1 = HMAC(HMAC(ck, ikm), 0x01), output2 = HMAC(temp, output1 || 0x02).
        let temp = BLAKE2b.hmac(key: chainingKey, ikm)
        #expect(two[0] == BLAKE2b.hmac(key: temp, [0x01]))
        #expect(two[1] == BLAKE2b.hmac(key: temp, two[0].withUnsafeBytes { [UInt8]($0) }, [0x02]))

        let otherIKM = BLAKE2b.hkdf(chainingKey: chainingKey, inputKeyMaterial: ikm + [0], outputs: 2)
        #expect(otherIKM[0] != two[0])
        let empty = BLAKE2b.hkdf(chainingKey: chainingKey, inputKeyMaterial: [UInt8](), outputs: 2)
        #expect(empty[0] != two[0])
    }

    @Test("HMAC depends on key and message, and splitting the message changes nothing")
    func hmac() {
        let key: [UInt8] = Array(repeating: 7, count: 32)
        let mac = BLAKE2b.hmac(key: key, Array("message".utf8))
        #expect(mac.count == 64)
        #expect(mac == BLAKE2b.hmac(key: key, Array("mess".utf8), Array("age".utf8)))
        #expect(mac != BLAKE2b.hmac(key: key, Array("messagf".utf8)))
        #expect(mac != BLAKE2b.hmac(key: [UInt8](repeating: 8, count: 32), Array("message".utf8)))
        // Key padding is with zeros, so a key and the same key with a trailing zero agree (RFC 2104).
        #expect(mac == BLAKE2b.hmac(key: key + [0], Array("message".utf8)))
    }
}
