private import CSodium

/// The identity file: a node's Ed25519 seed, sealed with a passphrase (SPEC.md, "Identity file").
///
/// ```
/// "WEFTID" | version (1) | protection | Ed25519 public key (32) | body | checksum (16)
/// protection 0 (unprotected): body = seed (32)
/// protection 1 (argon2id):    body = opslimit u32 | memlimit KiB u32 | salt (16) | nonce (24)
///                                    | XChaCha20-Poly1305(seed) (48), AD = every byte before it
/// checksum = BLAKE2b-128 of every byte before it
/// ```
/// The unkeyed checksum tells a damaged file from a wrong passphrase: if the checksum holds and
/// the AEAD fails, the passphrase is wrong; if the checksum fails, the file was truncated or altered.
public enum SealedIdentity {
    static let magic = Array("WEFTID".utf8)
    static let version: UInt8 = 1
    static let checksumByteCount = 16
    static let saltByteCount = Int(crypto_pwhash_SALTBYTES)
    static let nonceByteCount = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    /// Never run Argon2id with more memory than this, whatever a file asks for.
    static let maximumMemoryKiB: UInt32 = 1 << 20

    /// How the seed is protected.
    public enum Protection: Sendable {
        /// Stored in the clear: only for tests and throwaway nodes.
        case none
        /// Argon2id (crypto_pwhash) with these costs, then XChaCha20-Poly1305.
        case passphrase(SecureBytes, cost: ArgonCost = .interactive)
    }

    /// Argon2id costs. `.interactive` is libsodium's OPSLIMIT/MEMLIMIT_INTERACTIVE (2, 64 MiB).
    public struct ArgonCost: Sendable, Equatable {
        public var operations: UInt32
        public var memoryKiB: UInt32
        public init(operations: UInt32, memoryKiB: UInt32) {
            self.operations = operations
            self.memoryKiB = memoryKiB
        }
        /// Whether a reader runs Argon2id with these costs (SPEC.md §10): libsodium's minimums,
        /// at most 64 passes and at most 1 GiB, so a crafted file cannot demand unbounded work.
        public var isAcceptable: Bool {
            operations >= UInt32(crypto_pwhash_OPSLIMIT_MIN) && operations <= 64
                && UInt64(memoryKiB) * 1024 >= UInt64(crypto_pwhash_MEMLIMIT_MIN)
                && memoryKiB <= SealedIdentity.maximumMemoryKiB
        }

        public static let interactive = ArgonCost(
            operations: UInt32(crypto_pwhash_OPSLIMIT_INTERACTIVE),
            memoryKiB: UInt32(crypto_pwhash_MEMLIMIT_INTERACTIVE / 1024))
    }

    // MARK: - Sealing

    public static func seal(_ identity: NodeIdentity, protection: Protection) -> [UInt8] {
        _ = Sodium.ready
        return seal(
            identity, protection: protection,
            salt: secureRandomBytes(saltByteCount), nonce: secureRandomBytes(nonceByteCount))
    }

    /// `seal` with a chosen salt and nonce (both ignored for `.none`): only for golden vectors,
    /// since reusing a salt and nonce with the same passphrase would repeat the keystream.
    static func seal(_ identity: NodeIdentity, protection: Protection, salt: [UInt8], nonce: [UInt8]) -> [UInt8] {
        precondition(salt.count == saltByteCount && nonce.count == nonceByteCount, "wrong salt or nonce length")
        _ = Sodium.ready
        var file = magic + [version]
        switch protection {
        case .none:
            file.append(0)
            file += identity.publicKey.bytes
            file += identity.seed.withUnsafeBytes { [UInt8]($0) }
        case .passphrase(let passphrase, let cost):
            precondition(passphrase.count > 0, "an empty passphrase protects nothing; use .none")
            file.append(1)
            file += identity.publicKey.bytes
            file += bigEndian(cost.operations) + bigEndian(cost.memoryKiB)
            file += salt + nonce
            precondition(cost.isAcceptable, "Argon2id costs \(cost) are outside what readers accept")
            guard let key = deriveKey(passphrase: passphrase, salt: salt, cost: cost) else {
                preconditionFailure("Argon2id could not run with \(cost.memoryKiB) KiB (out of memory?)")
            }
            var sealed = [UInt8](repeating: 0, count: NodeIdentity.seedByteCount + 16)
            let additionalData = file
            key.withUnsafeBytes { k in
                identity.seed.withUnsafeBytes { seed in
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                        &sealed, nil, seed.bindMemory(to: UInt8.self).baseAddress!, UInt64(seed.count),
                        additionalData, UInt64(additionalData.count), nil, nonce,
                        k.bindMemory(to: UInt8.self).baseAddress!)
                }
            }
            file += sealed
        }
        file += BLAKE2b.hash(file, outputByteCount: checksumByteCount)
        return file
    }

    // MARK: - Opening

    /// The public key recorded in the file, readable without the passphrase (for `weft id`).
    public static func publicIdentity(of file: [UInt8]) throws(WeftCryptoError) -> PublicIdentity {
        _ = try checkedHeader(file)
        return try PublicIdentity(bytes: Array(file[8..<40]))
    }

    /// Whether opening the file needs a passphrase.
    public static func isProtected(_ file: [UInt8]) throws(WeftCryptoError) -> Bool {
        try checkedHeader(file) == 1
    }

    /// Opens the file. `passphrase` is ignored for an unprotected file.
    public static func open(_ file: [UInt8], passphrase: SecureBytes?) throws(WeftCryptoError) -> NodeIdentity {
        let protection = try checkedHeader(file)
        let recordedKey = Array(file[8..<40])
        let identity: NodeIdentity
        if protection == 0 {
            identity = NodeIdentity(seed: SecureBytes(copying: file[40..<72]))
        } else {
            guard let passphrase, passphrase.count > 0 else { throw .wrongPassphrase }
            let cost = ArgonCost(operations: readBigEndian(file, at: 40), memoryKiB: readBigEndian(file, at: 44))
            let salt = Array(file[48..<(48 + saltByteCount)])
            let nonceStart = 48 + saltByteCount
            let nonce = Array(file[nonceStart..<(nonceStart + nonceByteCount)])
            let sealedStart = nonceStart + nonceByteCount
            let sealed = Array(file[sealedStart..<(file.count - checksumByteCount)])
            let additionalData = Array(file[0..<sealedStart])
            guard cost.isAcceptable else { throw .damagedFile("its Argon2id parameters are out of range") }
            guard let key = deriveKey(passphrase: passphrase, salt: salt, cost: cost) else {
                throw .keyDerivationFailed
            }
            var failed = false
            let seed = SecureBytes(count: NodeIdentity.seedByteCount) { out in
                key.withUnsafeBytes { k in
                    failed = crypto_aead_xchacha20poly1305_ietf_decrypt(
                        out.bindMemory(to: UInt8.self).baseAddress!, nil, nil, sealed, UInt64(sealed.count),
                        additionalData, UInt64(additionalData.count), nonce,
                        k.bindMemory(to: UInt8.self).baseAddress!) != 0
                }
            }
            if failed { throw .wrongPassphrase }
            identity = NodeIdentity(seed: seed)
        }
        guard identity.publicKey.bytes == recordedKey else {
            throw .damagedFile("the recorded public key does not match the sealed key")
        }
        return identity
    }

    // MARK: - Layout

    /// Checks magic, version, length and checksum; returns the protection byte.
    private static func checkedHeader(_ file: [UInt8]) throws(WeftCryptoError) -> UInt8 {
        guard file.count >= 8, Array(file[0..<6]) == magic else {
            throw .damagedFile("it is not a Weft identity file")
        }
        guard file[6] == version else { throw .damagedFile("it has unknown format version \(file[6])") }
        let expectedLength: Int
        switch file[7] {
        case 0: expectedLength = 40 + NodeIdentity.seedByteCount + checksumByteCount
        case 1: expectedLength = 48 + saltByteCount + nonceByteCount + NodeIdentity.seedByteCount + 16 + checksumByteCount
        default: throw .damagedFile("it has unknown protection \(file[7])")
        }
        guard file.count == expectedLength else {
            throw .damagedFile("it is \(file.count) bytes long instead of \(expectedLength) (truncated?)")
        }
        let body = Array(file[0..<(file.count - checksumByteCount)])
        guard BLAKE2b.hash(body, outputByteCount: checksumByteCount) == Array(file.suffix(checksumByteCount)) else {
            throw .damagedFile("its checksum does not match (altered or corrupted)")
        }
        return file[7]
    }

    /// Runs Argon2id; nil only if libsodium fails (in practice: cannot allocate the memory).
    private static func deriveKey(passphrase: SecureBytes, salt: [UInt8], cost: ArgonCost) -> SecureBytes? {
        precondition(passphrase.count > 0 && cost.isAcceptable, "checked by the callers")
        var status: Int32 = 0
        let key = SecureBytes(count: Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)) { out in
            passphrase.withUnsafeBytes { p in
                status = crypto_pwhash(
                    out.bindMemory(to: UInt8.self).baseAddress!, UInt64(out.count),
                    p.bindMemory(to: CChar.self).baseAddress!, UInt64(p.count), salt,
                    UInt64(cost.operations), Int(cost.memoryKiB) * 1024, crypto_pwhash_ALG_ARGON2ID13)
            }
        }
        return status == 0 ? key : nil
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xff), UInt8((value >> 8) & 0xff), UInt8(value & 0xff)]
    }

    private static func readBigEndian(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }
}
