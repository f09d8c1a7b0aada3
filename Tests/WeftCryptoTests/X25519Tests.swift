import Testing
@testable import WeftCrypto

@Suite("X25519")
struct X25519Tests {
    private func bytes(_ secret: SecureBytes) -> [UInt8] { secret.withUnsafeBytes { [UInt8]($0) } }

    @Test("RFC 7748 §6.1 Diffie-Hellman known answer")
    func rfc7748() throws {
        let alice = X25519KeyPair(privateKey: SecureBytes(copying: [UInt8](
            hex: "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")))
        let bob = X25519KeyPair(privateKey: SecureBytes(copying: [UInt8](
            hex: "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")))
        #expect(alice.publicKey.hex == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        #expect(bob.publicKey.hex == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        let shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        #expect(bytes(try alice.sharedSecret(with: bob.publicKey)).hex == shared)
        #expect(bytes(try bob.sharedSecret(with: alice.publicKey)).hex == shared)
    }

    @Test("the shared secret is symmetric and differs between peers")
    func symmetric() throws {
        let a = X25519KeyPair.generate()
        let b = X25519KeyPair.generate()
        let c = X25519KeyPair.generate()
        let ab = try a.sharedSecret(with: b.publicKey)
        #expect(ab == (try b.sharedSecret(with: a.publicKey)))
        #expect(ab.count == 32)
        #expect(ab != (try a.sharedSecret(with: c.publicKey)))
        #expect(a.publicKey != b.publicKey)
    }

    /// Small-order points of Curve25519 (libsodium's blocklist): DH with them gives all zeros.
    static let smallOrderPoints: [String] = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    ]

    @Test("a small-order or all-zero public key is rejected", arguments: smallOrderPoints)
    func smallOrderRejected(point: String) {
        let pair = X25519KeyPair.generate()
        #expect(throws: WeftCryptoError.invalidPublicKey) { try pair.sharedSecret(with: [UInt8](hex: point)) }
    }

    @Test("a public key of the wrong length is rejected", arguments: [0, 31, 33, 64])
    func wrongLength(count: Int) {
        let pair = X25519KeyPair.generate()
        #expect(throws: WeftCryptoError.invalidPublicKey) {
            try pair.sharedSecret(with: [UInt8](repeating: 9, count: count))
        }
    }
}
