import Testing
@testable import WeftCrypto

@Suite("NodeIdentity and PublicIdentity")
struct NodeIdentityTests {
    private func seed(_ byte: UInt8) -> SecureBytes { SecureBytes(copying: [UInt8](repeating: byte, count: 32)) }

    @Test("RFC 8032 §7.1 test 1: the seed gives the known public key and signature")
    func rfc8032() throws {
        let identity = NodeIdentity(seed: SecureBytes(copying: [UInt8](
            hex: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")))
        #expect(identity.publicKey.bytes.hex == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let signature = identity.sign([UInt8]())
        #expect(signature.hex == "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
            + "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
        #expect(identity.publicKey.isValidSignature(signature, for: [UInt8]()))
    }

    @Test("a signature verifies for its message only, and only under its key")
    func signAndVerify() {
        let identity = NodeIdentity.generate()
        let other = NodeIdentity.generate()
        let message: [UInt8] = Array("post #1".utf8)
        let signature = identity.sign(message)
        #expect(signature.count == 64)
        #expect(identity.publicKey.isValidSignature(signature, for: message))
        #expect(!identity.publicKey.isValidSignature(signature, for: Array("post #2".utf8)))
        #expect(!identity.publicKey.isValidSignature(signature, for: message + [0]))
        #expect(!other.publicKey.isValidSignature(signature, for: message))
        for position in [0, 31, 32, 63] {
            var damaged = signature
            damaged[position] ^= 0x04
            #expect(!identity.publicKey.isValidSignature(damaged, for: message), "bit flipped at \(position)")
        }
        #expect(!identity.publicKey.isValidSignature(Array(signature.dropLast()), for: message))
        #expect(!identity.publicKey.isValidSignature(signature + [0], for: message))
        #expect(!identity.publicKey.isValidSignature([], for: message))
    }

    @Test("the agreement key pair matches the public identity's agreement key")
    func agreementKeys() throws {
        for identity in [NodeIdentity.generate(), NodeIdentity(seed: seed(1)), NodeIdentity(seed: seed(0xfe))] {
            let pair = identity.agreementKeyPair()
            #expect(pair.publicKey == (try identity.publicKey.agreementPublicKey()))
            #expect(pair.publicKey != identity.publicKey.bytes, "X25519 and Ed25519 encodings differ")
        }
        // Two identities can agree on a secret through their converted keys.
        let a = NodeIdentity.generate()
        let b = NodeIdentity.generate()
        let ab = try a.agreementKeyPair().sharedSecret(with: try b.publicKey.agreementPublicKey())
        let ba = try b.agreementKeyPair().sharedSecret(with: try a.publicKey.agreementPublicKey())
        #expect(ab == ba)
    }

    @Test("an identity is a function of its seed")
    func deterministic() {
        let first = NodeIdentity(seed: seed(7))
        let second = NodeIdentity(seed: seed(7))
        #expect(first.publicKey == second.publicKey)
        #expect(first.sign([1, 2, 3]) == second.sign([1, 2, 3]))
        #expect(first.agreementKeyPair().publicKey == second.agreementKeyPair().publicKey)
        #expect(first.seed == seed(7))
        #expect(NodeIdentity(seed: seed(8)).publicKey != first.publicKey)
        #expect(NodeIdentity.generate().publicKey != NodeIdentity.generate().publicKey)
    }

    @Test("PublicIdentity(bytes:) round-trips a real key")
    func publicIdentityRoundTrip() throws {
        let identity = NodeIdentity.generate()
        let parsed = try PublicIdentity(bytes: identity.publicKey.bytes)
        #expect(parsed == identity.publicKey)
        #expect(parsed.hashValue == identity.publicKey.hashValue)
        #expect(parsed.description == UserIdentifier.encode(identity.publicKey))
    }

    /// 32-byte strings libsodium's ed25519-to-curve25519 conversion refuses: small-order points
    /// (y = 0, a point of order 4; y = 1, the identity; y = -1, order 2) and y = 2, for which
    /// (y² - 1) / (d·y² + 1) is not a square mod p, so no point has it.
    static let invalidKeys: [String] = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "0200000000000000000000000000000000000000000000000000000000000000",
    ]

    @Test("keys libsodium rejects are rejected", arguments: invalidKeys)
    func invalidKey(hex: String) {
        #expect(throws: WeftCryptoError.invalidPublicKey) { try PublicIdentity(bytes: [UInt8](hex: hex)) }
    }

    @Test("keys of the wrong length are rejected", arguments: [0, 31, 33, 64])
    func wrongLength(count: Int) {
        let bytes = Array((NodeIdentity.generate().publicKey.bytes + [UInt8](repeating: 1, count: 64)).prefix(count))
        #expect(throws: WeftCryptoError.invalidPublicKey) { try PublicIdentity(bytes: bytes) }
    }
}
