private import CSodium

/// A node's long-term identity: one Ed25519 key pair. Its X25519 static key for Noise is derived
/// from it with libsodium's ed25519-to-curve25519 conversion, so one key names the node everywhere.
public struct NodeIdentity: Sendable {
    public static let seedByteCount = 32

    /// The 32-byte seed the key pair is derived from: the only secret that is stored.
    let seed: SecureBytes
    /// libsodium's 64-byte secret key (seed followed by the public key).
    private let secretKey: SecureBytes
    public let publicKey: PublicIdentity

    /// A new random identity.
    public static func generate() -> NodeIdentity {
        NodeIdentity(seed: .random(count: seedByteCount))
    }

    /// The identity for a seed (deterministic: used when opening a sealed file, and by vectors).
    public init(seed: SecureBytes) {
        precondition(seed.count == Self.seedByteCount, "Ed25519 seeds are 32 bytes")
        _ = Sodium.ready
        self.seed = seed
        var publicKey = [UInt8](repeating: 0, count: PublicIdentity.byteCount)
        self.secretKey = SecureBytes(count: Int(crypto_sign_SECRETKEYBYTES)) { sk in
            seed.withUnsafeBytes { s in
                publicKey.withUnsafeMutableBufferPointer { pk in
                    _ = crypto_sign_seed_keypair(
                        pk.baseAddress!, sk.bindMemory(to: UInt8.self).baseAddress!,
                        s.bindMemory(to: UInt8.self).baseAddress!)
                }
            }
        }
        self.publicKey = PublicIdentity(validatedBytes: publicKey)
    }

    /// A detached Ed25519 signature of `message`.
    public func sign(_ message: some ContiguousBytes) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: Int(crypto_sign_BYTES))
        secretKey.withUnsafeBytes { sk in
            message.withUnsafeBytes { m in
                signature.withUnsafeMutableBufferPointer { sig in
                    _ = crypto_sign_detached(
                        sig.baseAddress!, nil, m.bindMemory(to: UInt8.self).baseAddress, UInt64(m.count),
                        sk.bindMemory(to: UInt8.self).baseAddress!)
                }
            }
        }
        return signature
    }

    /// The X25519 key pair this identity uses as its Noise static key.
    public func agreementKeyPair() -> X25519KeyPair {
        let privateKey = SecureBytes(count: X25519KeyPair.keyByteCount) { out in
            secretKey.withUnsafeBytes { sk in
                _ = crypto_sign_ed25519_sk_to_curve25519(
                    out.bindMemory(to: UInt8.self).baseAddress!, sk.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
        return X25519KeyPair(privateKey: privateKey)
    }
}

/// The public half of a `NodeIdentity`: an Ed25519 public key.
public struct PublicIdentity: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 32

    public let bytes: [UInt8]
    /// The key as four big-endian words: compared, ordered and hashed without the array.
    private let words: (UInt64, UInt64, UInt64, UInt64)

    init(validatedBytes: [UInt8]) {
        self.bytes = validatedBytes
        words = Self.words(of: validatedBytes)
    }

    /// Accepts 32 bytes that decode to a point usable for X25519 (checked by converting them).
    public init(bytes: [UInt8]) throws(WeftCryptoError) {
        guard bytes.count == Self.byteCount else { throw .invalidPublicKey }
        self.bytes = bytes
        words = Self.words(of: bytes)
        _ = try agreementPublicKey()
    }

    private static func words(of bytes: [UInt8]) -> (UInt64, UInt64, UInt64, UInt64) {
        bytes.withUnsafeBytes { raw in
            (UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
             UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
             UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
             UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
        }
    }

    /// Takes 32 bytes on trust, without the point check `init(bytes:)` makes (about as costly
    /// as an X25519 operation). For keys whose use checks them anyway: a handshake converts the
    /// key (`agreementPublicKey()` fails on a bad point) and signature verification rejects one.
    public init(unvalidatedBytes bytes: [UInt8]) {
        precondition(bytes.count == Self.byteCount, "Ed25519 public keys are 32 bytes")
        self.bytes = bytes
        words = Self.words(of: bytes)
    }

    /// Hashes the key as words: keys are dictionary keys everywhere in the model.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    /// Verifies a detached Ed25519 signature.
    public func isValidSignature(_ signature: [UInt8], for message: some ContiguousBytes) -> Bool {
        _ = Sodium.ready
        guard signature.count == Int(crypto_sign_BYTES) else { return false }
        return message.withUnsafeBytes { m in
            crypto_sign_verify_detached(
                signature, m.bindMemory(to: UInt8.self).baseAddress, UInt64(m.count), bytes) == 0
        }
    }

    /// The X25519 public key derived from this Ed25519 key: what the peer's Noise static must be.
    public func agreementPublicKey() throws(WeftCryptoError) -> [UInt8] {
        _ = Sodium.ready
        var out = [UInt8](repeating: 0, count: X25519KeyPair.keyByteCount)
        guard crypto_sign_ed25519_pk_to_curve25519(&out, bytes) == 0 else { throw .invalidPublicKey }
        return out
    }

    /// The user identifier, e.g. `weft1…` (see `UserIdentifier`).
    public var description: String { UserIdentifier.encode(self) }
}

extension PublicIdentity: Comparable {
    /// Byte order of the keys: the order participant lists and merge rules use.
    public static func < (lhs: PublicIdentity, rhs: PublicIdentity) -> Bool {
        let (a, b) = (lhs.words, rhs.words)
        if a.0 != b.0 { return a.0 < b.0 }
        if a.1 != b.1 { return a.1 < b.1 }
        if a.2 != b.2 { return a.2 < b.2 }
        return a.3 < b.3
    }

    public static func == (lhs: PublicIdentity, rhs: PublicIdentity) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2 && lhs.words.3 == rhs.words.3
    }
}
