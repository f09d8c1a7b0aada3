private import CSodium

/// An X25519 key pair (Noise's DH functions for the 25519 curve).
public struct X25519KeyPair: Sendable {
    public static let keyByteCount = 32

    public let publicKey: [UInt8]
    let privateKey: SecureBytes

    /// A fresh key pair, by default from libsodium's CSPRNG.
    public static func generate(using random: any RandomSource = SystemRandomSource()) -> X25519KeyPair {
        X25519KeyPair(privateKey: random.secret(count: keyByteCount))
    }

    /// The key pair for a given private key (used by test vectors and by identities).
    public init(privateKey: SecureBytes) {
        precondition(privateKey.count == Self.keyByteCount, "X25519 private keys are 32 bytes")
        _ = Sodium.ready
        self.privateKey = privateKey
        var publicKey = [UInt8](repeating: 0, count: Self.keyByteCount)
        privateKey.withUnsafeBytes { sk in
            publicKey.withUnsafeMutableBufferPointer { pk in
                _ = crypto_scalarmult_curve25519_base(pk.baseAddress!, sk.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        self.publicKey = publicKey
    }

    /// DH(self, remote). Throws if the result is all zeros (a small-order remote key), which
    /// Noise permits us to reject and which we always reject.
    public func sharedSecret(with remotePublicKey: [UInt8]) throws(WeftCryptoError) -> SecureBytes {
        guard remotePublicKey.count == Self.keyByteCount else { throw .invalidPublicKey }
        var failed = false
        let secret = SecureBytes(count: Self.keyByteCount) { out in
            privateKey.withUnsafeBytes { sk in
                remotePublicKey.withUnsafeBufferPointer { pk in
                    failed = crypto_scalarmult_curve25519(
                        out.bindMemory(to: UInt8.self).baseAddress!,
                        sk.bindMemory(to: UInt8.self).baseAddress!,
                        pk.baseAddress!) != 0
                }
            }
        }
        if failed { throw .invalidPublicKey }
        return secret
    }
}
