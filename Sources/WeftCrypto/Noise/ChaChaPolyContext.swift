private import CLibcrypto

/// ChaCha20-Poly1305 (IETF, RFC 8439) under one key, through OpenSSL's libcrypto: the cipher
/// of libsodium's `crypto_aead_chacha20poly1305_ietf`, byte for byte, at about 2.4 times its
/// speed on this machine (3.7 GB/s against 1.5 with AVX-512, `openssl speed`). Transport
/// records carry every byte a node moves, so their cipher is half the CPU time of a content
/// transfer that hashing leaves; libsodium keeps everything else (identities, hashing, the
/// handshake's Diffie-Hellman).
///
/// Not thread-safe, and `@unchecked Sendable` by confinement: one `CipherState` owns it, keeps
/// it inside the state its `Mutex` guards, and calls it only while holding that lock.
final class ChaChaPolyContext: @unchecked Sendable {
    static let tagByteCount = 16
    /// Records longer than this never reach it: OpenSSL counts bytes in `Int32`.
    static let maxByteCount = Int(Int32.max) - tagByteCount

    private let context: OpaquePointer

    /// Nil if libcrypto cannot make a context (out of memory) or refuses the key.
    init?(key: SecureBytes) {
        guard key.count == 32, let context = EVP_CIPHER_CTX_new() else { return nil }
        self.context = context
        let keyed = key.withUnsafeBytes { k in
            EVP_CipherInit_ex(context, EVP_chacha20_poly1305(), nil, k.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, 1)
        }
        guard keyed == 1 else {
            ERR_clear_error()
            EVP_CIPHER_CTX_free(context)
            return nil
        }
    }

    /// Frees the context, which wipes the key it holds (`EVP_CIPHER_CTX_free` cleanses).
    deinit { EVP_CIPHER_CTX_free(context) }

    /// Encrypts `plaintext` into `output` (the same memory, or none of it) and writes the tag
    /// after the ciphertext: `output` holds `plaintext.count + 16` bytes.
    func seal(
        _ plaintext: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, nonce: UnsafeRawBufferPointer,
        associatedData: UnsafeRawBufferPointer
    ) -> Bool {
        guard plaintext.count <= Self.maxByteCount, output.count >= plaintext.count + Self.tagByteCount,
            let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self),
            start(encrypting: true, nonce: nonce, associatedData: associatedData),
            update(plaintext, into: out)
        else { return fail() }
        var finalCount: Int32 = 0
        guard EVP_CipherFinal_ex(context, out + plaintext.count, &finalCount) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(Self.tagByteCount), out + plaintext.count) == 1
        else { return fail() }
        return true
    }

    /// Decrypts `record` (ciphertext and tag) into `output` (the same memory, or none of it),
    /// which holds `record.count - 16` bytes. False if the tag does not verify; `output` is
    /// then unspecified.
    func open(
        _ record: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, nonce: UnsafeRawBufferPointer,
        associatedData: UnsafeRawBufferPointer
    ) -> Bool {
        guard record.count >= Self.tagByteCount, record.count - Self.tagByteCount <= Self.maxByteCount,
            output.count >= record.count - Self.tagByteCount, let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        else { return false }
        let ciphertext = UnsafeRawBufferPointer(rebasing: record.prefix(record.count - Self.tagByteCount))
        // Copied first: OpenSSL wants a mutable pointer for the tag, which it only reads.
        return withUnsafeTemporaryAllocation(byteCount: Self.tagByteCount, alignment: 1) { tag in
            tag.copyMemory(from: UnsafeRawBufferPointer(rebasing: record.suffix(Self.tagByteCount)))
            guard start(encrypting: false, nonce: nonce, associatedData: associatedData),
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(Self.tagByteCount), tag.baseAddress) == 1,
                update(ciphertext, into: out)
            else { return fail() }
            var finalCount: Int32 = 0
            guard EVP_CipherFinal_ex(context, out + ciphertext.count, &finalCount) == 1 else { return fail() }
            return true
        }
    }

    /// Sets the nonce and direction (the key stays) and takes in the associated data.
    private func start(encrypting: Bool, nonce: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer) -> Bool {
        guard nonce.count == 12, associatedData.count <= Self.maxByteCount,
            EVP_CipherInit_ex(context, nil, nil, nil, nonce.baseAddress?.assumingMemoryBound(to: UInt8.self), encrypting ? 1 : 0) == 1
        else { return false }
        guard let ad = associatedData.baseAddress, !associatedData.isEmpty else { return true }
        var count: Int32 = 0
        return EVP_CipherUpdate(context, nil, &count, ad.assumingMemoryBound(to: UInt8.self), Int32(associatedData.count)) == 1
    }

    /// Runs the cipher over `input`, writing as many bytes at `output`.
    private func update(_ input: UnsafeRawBufferPointer, into output: UnsafeMutablePointer<UInt8>) -> Bool {
        guard let base = input.baseAddress, !input.isEmpty else { return true }
        var count: Int32 = 0
        return EVP_CipherUpdate(context, output, &count, base.assumingMemoryBound(to: UInt8.self), Int32(input.count)) == 1
            && Int(count) == input.count
    }

    /// A failure leaves nothing on OpenSSL's per-thread error queue for a later call to find.
    private func fail() -> Bool {
        ERR_clear_error()
        return false
    }
}
