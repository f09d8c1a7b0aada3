import NIOCore
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

        /// The protection byte in the file.
        var byte: UInt8 {
            switch self {
            case .none: 0
            case .passphrase: 1
            }
        }
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
        var file = ByteBuffer()
        // One allocation of the exact size (no stray copies when it grows), wiped afterwards:
        // an unprotected file holds the seed.
        if let length = byteCount(protection: protection.byte) { file.reserveCapacity(length) }
        defer { file.withUnsafeMutableReadableBytes(secureZero) }
        file.writeBytes(magic)
        file.writeInteger(version)
        file.writeInteger(protection.byte)
        file.writeBytes(identity.publicKey.bytes)
        switch protection {
        case .none:
            identity.seed.withUnsafeBytes { _ = file.writeBytes($0) }
        case .passphrase(let passphrase, let cost):
            precondition(passphrase.count > 0, "an empty passphrase protects nothing; use .none")
            precondition(cost.isAcceptable, "Argon2id costs \(cost) are outside what readers accept")
            file.writeInteger(cost.operations)
            file.writeInteger(cost.memoryKiB)
            file.writeBytes(salt)
            file.writeBytes(nonce)
            guard let key = deriveKey(passphrase: passphrase, salt: salt, cost: cost) else {
                preconditionFailure("Argon2id could not run with \(cost.memoryKiB) KiB (out of memory?)")
            }
            var sealed = [UInt8](repeating: 0, count: sealedSeedByteCount)
            let additionalData = Array(file.readableBytesView)
            key.withUnsafeBytes { k in
                identity.seed.withUnsafeBytes { seed in
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                        &sealed, nil, seed.bindMemory(to: UInt8.self).baseAddress!, UInt64(seed.count),
                        additionalData, UInt64(additionalData.count), nil, nonce,
                        k.bindMemory(to: UInt8.self).baseAddress!)
                }
            }
            file.writeBytes(sealed)
        }
        let checksum = BLAKE2b.Hasher(outputByteCount: checksumByteCount)
        file.withUnsafeReadableBytes { checksum.update(rawBytes: $0) }
        file.writeBytes(checksum.finalize())
        return Array(file.readableBytesView)
    }

    // MARK: - Opening

    /// The public key recorded in the file, readable without the passphrase (for `weft id`).
    public static func publicIdentity(of file: [UInt8]) throws(WeftCryptoError) -> PublicIdentity {
        try PublicIdentity(bytes: try CheckedFile(file).recordedKey)
    }

    /// Whether opening the file needs a passphrase.
    public static func isProtected(_ file: [UInt8]) throws(WeftCryptoError) -> Bool {
        if case .passphrase = try CheckedFile(file).contents { true } else { false }
    }

    /// Opens the file. `passphrase` is ignored for an unprotected file.
    public static func open(_ file: [UInt8], passphrase: SecureBytes?) throws(WeftCryptoError) -> NodeIdentity {
        let checked = try CheckedFile(file)
        let identity: NodeIdentity
        switch checked.contents {
        case .unprotected(let seed):
            identity = NodeIdentity(seed: seed)
        case .passphrase(let cost, let salt, let nonce, let sealed):
            guard let passphrase, passphrase.count > 0 else { throw .wrongPassphrase }
            guard cost.isAcceptable else { throw .damagedFile("its Argon2id parameters are out of range") }
            // Every byte before the sealed seed is authenticated.
            let additionalData = Array(file[0..<(file.count - checksumByteCount - sealedSeedByteCount)])
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
        guard identity.publicKey.bytes == checked.recordedKey else {
            throw .damagedFile("the recorded public key does not match the sealed key")
        }
        return identity
    }

    // MARK: - Layout

    /// XChaCha20-Poly1305 of the 32-byte seed: the seed and a 16-byte tag.
    static let sealedSeedByteCount = NodeIdentity.seedByteCount + 16
    /// Magic, version, protection, public key.
    static let headerByteCount = 6 + 1 + 1 + PublicIdentity.byteCount

    /// The whole file's length for a protection byte, or nil for an unknown protection.
    static func byteCount(protection: UInt8) -> Int? {
        switch protection {
        case 0: headerByteCount + NodeIdentity.seedByteCount + checksumByteCount
        case 1: headerByteCount + 8 + saltByteCount + nonceByteCount + sealedSeedByteCount + checksumByteCount
        default: nil
        }
    }

    /// A file whose magic, version, length and checksum hold, split into its fields.
    private struct CheckedFile {
        enum Contents {
            case unprotected(seed: SecureBytes)
            case passphrase(cost: ArgonCost, salt: [UInt8], nonce: [UInt8], sealed: [UInt8])
        }

        let recordedKey: [UInt8]
        let contents: Contents

        init(_ file: [UInt8]) throws(WeftCryptoError) {
            var buffer = ByteBuffer(bytes: file)
            // The copy may hold an unprotected seed: zero it. Nothing read below keeps a slice
            // of it, so the storage is not shared and is wiped in place.
            defer {
                buffer.moveReaderIndex(to: 0)
                buffer.withUnsafeMutableReadableBytes(secureZero)
            }
            guard let magic = buffer.readBytes(length: SealedIdentity.magic.count), magic == SealedIdentity.magic,
                let version = buffer.readInteger(as: UInt8.self),
                let protection = buffer.readInteger(as: UInt8.self)
            else { throw .damagedFile("it is not a Weft identity file") }
            guard version == SealedIdentity.version else { throw .damagedFile("it has unknown format version \(version)") }
            guard let expectedLength = SealedIdentity.byteCount(protection: protection) else {
                throw .damagedFile("it has unknown protection \(protection)")
            }
            guard file.count == expectedLength else {
                throw .damagedFile("it is \(file.count) bytes long instead of \(expectedLength) (truncated?)")
            }
            let checksum = BLAKE2b.Hasher(outputByteCount: checksumByteCount)
            file.withUnsafeBytes { checksum.update(rawBytes: UnsafeRawBufferPointer(rebasing: $0.dropLast(checksumByteCount))) }
            guard checksum.finalize() == Array(file.suffix(checksumByteCount)) else {
                throw .damagedFile("its checksum does not match (altered or corrupted)")
            }

            // The length is checked, so every read below finds its bytes.
            guard let recordedKey = buffer.readBytes(length: PublicIdentity.byteCount) else {
                throw .damagedFile("it is shorter than its header")
            }
            self.recordedKey = recordedKey
            if protection == 0 {
                let seed = buffer.withUnsafeReadableBytes { readable in
                    SecureBytes(copying: UnsafeRawBufferPointer(rebasing: readable.prefix(NodeIdentity.seedByteCount)))
                }
                contents = .unprotected(seed: seed)
            } else {
                guard let operations = buffer.readInteger(as: UInt32.self),
                    let memoryKiB = buffer.readInteger(as: UInt32.self),
                    let salt = buffer.readBytes(length: saltByteCount),
                    let nonce = buffer.readBytes(length: nonceByteCount),
                    let sealed = buffer.readBytes(length: sealedSeedByteCount)
                else { throw .damagedFile("it is shorter than its protection needs") }
                contents = .passphrase(
                    cost: ArgonCost(operations: operations, memoryKiB: memoryKiB), salt: salt, nonce: nonce, sealed: sealed)
            }
        }
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
}
