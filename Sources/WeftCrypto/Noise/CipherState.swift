private import CSodium

/// Noise's CipherState over ChaChaPoly (ChaCha20-Poly1305 IETF): a key and a 64-bit nonce
/// (Noise §5.1). Used inside the handshake and, after `split()`, for each transport direction.
///
/// The nonce is the 32-bit zero prefix followed by `n` little-endian (Noise §12.3).
public struct CipherState: Sendable {
    public static let keyByteCount = 32
    public static let tagByteCount = 16

    private var key: SecureBytes?
    /// The next nonce to use.
    public private(set) var nonce: UInt64 = 0

    public init(key: SecureBytes? = nil) {
        precondition(key == nil || key!.count == Self.keyByteCount, "ChaChaPoly keys are 32 bytes")
        self.key = key
    }

    public var hasKey: Bool { key != nil }

    /// Noise's SetNonce; used by tests and by nothing on the wire.
    public mutating func setNonce(_ n: UInt64) { nonce = n }

    // MARK: - Whole-message API (handshake payloads, tests)

    /// EncryptWithAd: without a key the plaintext passes through unchanged.
    public mutating func encrypt(associatedData: [UInt8], plaintext: [UInt8]) throws(WeftCryptoError) -> [UInt8] {
        guard key != nil else { return plaintext }
        var buffer = plaintext + [UInt8](repeating: 0, count: Self.tagByteCount)
        var cipher = self
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(WeftCryptoError) in
                try cipher.seal(inPlace: raw, plaintextByteCount: plaintext.count, associatedData: associatedData)
            }
        }
        try result.get()
        self = cipher
        return buffer
    }

    /// DecryptWithAd: throws if the tag does not verify, and then the nonce does not advance.
    public mutating func decrypt(associatedData: [UInt8], ciphertext: [UInt8]) throws(WeftCryptoError) -> [UInt8] {
        guard key != nil else { return ciphertext }
        guard ciphertext.count >= Self.tagByteCount else { throw .decryptionFailed }
        var buffer = ciphertext
        var cipher = self
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(WeftCryptoError) in try cipher.open(inPlace: raw, associatedData: associatedData) }
        }
        let count = try result.get()
        self = cipher
        return Array(buffer.prefix(count))
    }

    // MARK: - In-place API (transport frames: no copies, no allocations)

    /// Encrypts the first `plaintextByteCount` bytes of `buffer` in place and writes the 16-byte
    /// tag right after them. `buffer` must hold at least `plaintextByteCount + 16` bytes.
    public mutating func seal(
        inPlace buffer: UnsafeMutableRawBufferPointer, plaintextByteCount: Int,
        associatedData: some ContiguousBytes = [UInt8]()
    ) throws(WeftCryptoError) {
        guard let key else { preconditionFailure("seal(inPlace:) needs a keyed CipherState") }
        precondition(buffer.count >= plaintextByteCount + Self.tagByteCount, "no room for the tag")
        guard nonce != .max else { throw .nonceExhausted }
        let npub = Self.nonceBytes(nonce)
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
        nonce += 1
    }

    /// Decrypts `buffer` (ciphertext followed by the tag) in place and returns the plaintext
    /// length. On failure the buffer's contents are unspecified and the nonce does not advance.
    public mutating func open(
        inPlace buffer: UnsafeMutableRawBufferPointer, associatedData: some ContiguousBytes = [UInt8]()
    ) throws(WeftCryptoError) -> Int {
        guard let key else { preconditionFailure("open(inPlace:) needs a keyed CipherState") }
        guard buffer.count >= Self.tagByteCount else { throw .decryptionFailed }
        guard nonce != .max else { throw .nonceExhausted }
        let npub = Self.nonceBytes(nonce)
        let status = withUnsafeBytes(of: npub) { n in
            key.withUnsafeBytes { k in
                associatedData.withUnsafeBytes { ad in
                    let base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    return crypto_aead_chacha20poly1305_ietf_decrypt(
                        base, nil, nil, base, UInt64(buffer.count),
                        ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                        n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        guard status == 0 else { throw .decryptionFailed }
        nonce += 1
        return buffer.count - Self.tagByteCount
    }

    // MARK: - Rekey (Noise §4.2, §11.3)

    /// REKEY(k): the first 32 bytes of ENCRYPT(k, 2^64-1, empty, 32 zero bytes). The nonce
    /// keeps counting.
    public mutating func rekey() {
        guard let key else { preconditionFailure("rekey() needs a keyed CipherState") }
        let npub = Self.nonceBytes(.max)
        var block = [UInt8](repeating: 0, count: Self.keyByteCount + Self.tagByteCount)
        defer { block.withUnsafeMutableBytes(secureZero) }
        withUnsafeBytes(of: npub) { n in
            key.withUnsafeBytes { k in
                block.withUnsafeMutableBufferPointer { out in
                    _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                        out.baseAddress!, nil, out.baseAddress!, UInt64(Self.keyByteCount),
                        nil, 0, nil, n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                        k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        self.key = SecureBytes(copying: block[0..<Self.keyByteCount])
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
