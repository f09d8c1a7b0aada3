private import CSodium
import Synchronization

/// Noise's CipherState over ChaChaPoly (ChaCha20-Poly1305 IETF): a key and a 64-bit nonce
/// (Noise §5.1). Used inside the handshake and, after `split()`, for each transport direction.
///
/// A reference type that owns its key and nonce, as swift-nio-ssh's transport protection does:
/// every copy of a handshake, codec or connection that holds it seals with the same counter,
/// so no code path can copy the state out, seal, and lose the nonce it used. A sealed nonce is
/// never used again, whoever holds the reference. The nonce is the 32-bit zero prefix followed
/// by `n` little-endian (Noise §12.3).
public final class CipherState: Sendable {
    public static let keyByteCount = 32
    public static let tagByteCount = 16

    /// The key and the next nonce, changed together under the lock.
    private struct Keying: Sendable {
        var key: SecureBytes?
        var nonce: UInt64 = 0
    }

    /// A lock, not a convention, makes the class `Sendable`: one connection uses it from one
    /// thread at a time, so it is never contended, and it does not allocate.
    private let keying: Mutex<Keying>

    public init(key: SecureBytes? = nil) {
        precondition(key.map { $0.count == Self.keyByteCount } ?? true, "ChaChaPoly keys are 32 bytes")
        keying = Mutex(Keying(key: key))
    }

    public var hasKey: Bool { keying.withLock { $0.key != nil } }

    /// The next nonce to use.
    public var nonce: UInt64 { keying.withLock { $0.nonce } }

    /// The key's bytes, for a key log (SPEC.md §18) only; nil without a key.
    func keyBytes() -> [UInt8]? {
        keying.withLock { $0.key?.withUnsafeBytes { [UInt8]($0) } }
    }

    /// Noise's SetNonce; used by tests and by nothing on the wire.
    public func setNonce(_ n: UInt64) { keying.withLock { $0.nonce = n } }

    // MARK: - Whole-message API (handshake payloads, tests)

    /// EncryptWithAd: without a key the plaintext passes through unchanged.
    public func encrypt(associatedData: [UInt8], plaintext: [UInt8]) throws(WeftCryptoError) -> [UInt8] {
        guard hasKey else { return plaintext }
        var buffer = plaintext + [UInt8](repeating: 0, count: Self.tagByteCount)
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(WeftCryptoError) in
                try seal(inPlace: raw, plaintextByteCount: plaintext.count, associatedData: associatedData)
            }
        }
        try result.get()
        return buffer
    }

    /// DecryptWithAd: throws if the tag does not verify, and then the nonce does not advance.
    public func decrypt(associatedData: [UInt8], ciphertext: [UInt8]) throws(WeftCryptoError) -> [UInt8] {
        guard hasKey else { return ciphertext }
        guard ciphertext.count >= Self.tagByteCount else { throw .decryptionFailed }
        var buffer = ciphertext
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(WeftCryptoError) in try open(inPlace: raw, associatedData: associatedData) }
        }
        return Array(buffer.prefix(try result.get()))
    }

    // MARK: - In-place API (transport frames: no copies, no allocations)

    /// Encrypts the first `plaintextByteCount` bytes of `buffer` in place and writes the 16-byte
    /// tag right after them. `buffer` must hold at least `plaintextByteCount + 16` bytes.
    public func seal(
        inPlace buffer: UnsafeMutableRawBufferPointer, plaintextByteCount: Int,
        associatedData: some ContiguousBytes = [UInt8]()
    ) throws(WeftCryptoError) {
        precondition(buffer.count >= plaintextByteCount + Self.tagByteCount, "no room for the tag")
        try keying.withLock { keying throws(WeftCryptoError) in
            guard let key = keying.key else { preconditionFailure("seal(inPlace:) needs a keyed CipherState") }
            guard keying.nonce != .max else { throw .nonceExhausted }
            let npub = Self.nonceBytes(keying.nonce)
            withUnsafeBytes(of: npub) { n in
                key.withUnsafeBytes { k in
                    associatedData.withUnsafeBytes { ad in
                        let base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
                        _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                            base, nil, base, UInt64(plaintextByteCount),
                            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                            nil, n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
            keying.nonce += 1
        }
    }

    /// Decrypts `buffer` (ciphertext followed by the tag) in place and returns the plaintext
    /// length. On failure the buffer's contents are unspecified and the nonce does not advance.
    public func open(
        inPlace buffer: UnsafeMutableRawBufferPointer, associatedData: some ContiguousBytes = [UInt8]()
    ) throws(WeftCryptoError) -> Int {
        try open(UnsafeRawBufferPointer(buffer), into: buffer, associatedData: associatedData)
    }

    /// Decrypts `record` (ciphertext followed by the tag) into `output`, which holds at least
    /// `record.count - 16` bytes and either is `record` itself or does not overlap it, and
    /// returns the plaintext length. Out of place, a receiver decrypts a record straight into
    /// a buffer of the frame's own, with no copy after and no write to the record's buffer. On
    /// failure `output`'s contents are unspecified and the nonce does not advance.
    public func open(
        _ record: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
        associatedData: some ContiguousBytes = [UInt8]()
    ) throws(WeftCryptoError) -> Int {
        guard record.count >= Self.tagByteCount, let ciphertext = record.baseAddress else { throw .decryptionFailed }
        let plaintextByteCount = record.count - Self.tagByteCount
        guard output.count >= plaintextByteCount else { throw .decryptionFailed }
        return try keying.withLock { keying throws(WeftCryptoError) -> Int in
            guard let key = keying.key else { preconditionFailure("open(_:into:) needs a keyed CipherState") }
            guard keying.nonce != .max else { throw .nonceExhausted }
            let npub = Self.nonceBytes(keying.nonce)
            let status = withUnsafeBytes(of: npub) { n in
                key.withUnsafeBytes { k in
                    associatedData.withUnsafeBytes { ad in
                        crypto_aead_chacha20poly1305_ietf_decrypt(
                            output.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, nil,
                            ciphertext.assumingMemoryBound(to: UInt8.self), UInt64(record.count),
                            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                            n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    }
                }
            }
            guard status == 0 else { throw .decryptionFailed }
            keying.nonce += 1
            return plaintextByteCount
        }
    }

    // MARK: - Rekey (Noise §4.2, §11.3)

    /// REKEY(k): the first 32 bytes of ENCRYPT(k, 2^64-1, empty, 32 zero bytes). The nonce
    /// keeps counting.
    public func rekey() {
        keying.withLock { keying in
            guard let key = keying.key else { preconditionFailure("rekey() needs a keyed CipherState") }
            keying.key = Self.rekeyed(key)
        }
    }

    private static func rekeyed(_ key: SecureBytes) -> SecureBytes {
        let npub = nonceBytes(.max)
        return withUnsafeTemporaryAllocation(byteCount: keyByteCount + tagByteCount, alignment: 16) { block in
            defer { secureZero(block) }
            block.initializeMemory(as: UInt8.self, repeating: 0)
            let out = block.baseAddress!.assumingMemoryBound(to: UInt8.self)
            withUnsafeBytes(of: npub) { n in
                key.withUnsafeBytes { k in
                    _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                        out, nil, out, UInt64(keyByteCount), nil, 0, nil,
                        n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
            return SecureBytes(copying: UnsafeRawBufferPointer(rebasing: block[0..<keyByteCount]))
        }
    }

    private typealias Nonce = (
        UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
    )

    private static func nonceBytes(_ n: UInt64) -> Nonce {
        let le = n.littleEndian
        return withUnsafeBytes(of: le) { b in
            (0, 0, 0, 0, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7])
        }
    }
}
