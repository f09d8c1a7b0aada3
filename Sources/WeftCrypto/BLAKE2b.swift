private import CSodium

/// BLAKE2b (libsodium's `crypto_generichash_blake2b`), plus HMAC and HKDF built on it exactly as
/// the Noise Protocol Framework defines them (Noise §4.3, §5.2), with a 128-byte block.
public enum BLAKE2b {
    /// Noise's HASHLEN for BLAKE2b.
    public static let outputByteCount = 64
    /// BLAKE2b's block length, used by HMAC.
    public static let blockByteCount = 128

    /// An incremental BLAKE2b hasher with a chosen output length (1...64 bytes), for inputs
    /// too large to concatenate. libsodium's state is 64-byte aligned, which Swift cannot lay
    /// out, so it lives in its own allocation.
    public final class Hasher {
        private let state: UnsafeMutableRawPointer
        private let outputByteCount: Int

        public init(outputByteCount: Int = BLAKE2b.outputByteCount) {
            precondition((1...64).contains(outputByteCount), "BLAKE2b output must be 1...64 bytes")
            _ = Sodium.ready
            self.outputByteCount = outputByteCount
            state = .allocate(byteCount: crypto_generichash_blake2b_statebytes(), alignment: 64)
            crypto_generichash_blake2b_init(OpaquePointer(state), nil, 0, outputByteCount)
        }

        deinit {
            secureZero(UnsafeMutableRawBufferPointer(start: state, count: crypto_generichash_blake2b_statebytes()))
            state.deallocate()
        }

        public func update(_ bytes: some ContiguousBytes) {
            bytes.withUnsafeBytes { update(rawBytes: $0) }
        }

        public func update(rawBytes: UnsafeRawBufferPointer) {
            guard rawBytes.count > 0 else { return }
            crypto_generichash_blake2b_update(
                OpaquePointer(state), rawBytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                UInt64(rawBytes.count))
        }

        public func finalize() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: outputByteCount)
            out.withUnsafeMutableBufferPointer {
                _ = crypto_generichash_blake2b_final(OpaquePointer(state), $0.baseAddress!, outputByteCount)
            }
            return out
        }
    }

    /// BLAKE2b of the concatenation of `parts` (one libsodium call over one buffer).
    public static func hash(_ parts: [UInt8]..., outputByteCount: Int = BLAKE2b.outputByteCount) -> [UInt8] {
        _ = Sodium.ready
        let input = parts.count == 1 ? parts[0] : Array(parts.joined())
        var out = [UInt8](repeating: 0, count: outputByteCount)
        out.withUnsafeMutableBufferPointer { o in
            input.withUnsafeBufferPointer { i in
                _ = crypto_generichash_blake2b(o.baseAddress!, outputByteCount, i.baseAddress, UInt64(i.count), nil, 0)
            }
        }
        return out
    }

    /// HMAC-BLAKE2b (RFC 2104 with a 128-byte block and 64-byte output).
    ///
    /// Runs in stack memory (the padded key, libsodium's 64-byte-aligned state, the inner hash),
    /// all wiped before returning: the handshake computes about forty of these.
    public static func hmac(key: some ContiguousBytes, _ message: [UInt8]...) -> SecureBytes {
        _ = Sodium.ready
        let stateByteCount = crypto_generichash_blake2b_statebytes()
        return withUnsafeTemporaryAllocation(byteCount: stateByteCount + 2 * blockByteCount, alignment: 64) { scratch in
            defer { secureZero(scratch) }
            let state = OpaquePointer(scratch.baseAddress!)
            let pad = UnsafeMutableRawBufferPointer(rebasing: scratch[stateByteCount..<(stateByteCount + blockByteCount)])
            let innerHash = UnsafeMutableRawBufferPointer(
                rebasing: scratch[(stateByteCount + blockByteCount)..<(stateByteCount + blockByteCount + outputByteCount)])
            let padBytes = pad.baseAddress!.assumingMemoryBound(to: UInt8.self)

            // Noise keys are at most HASHLEN bytes, so they never need hashing down first.
            func fillPad(_ mask: UInt8) {
                pad.initializeMemory(as: UInt8.self, repeating: mask)
                key.withUnsafeBytes { k in
                    precondition(k.count <= blockByteCount, "HMAC key longer than the BLAKE2b block")
                    for i in 0..<k.count { pad[i] = k[i] ^ mask }
                }
            }

            fillPad(0x36)
            crypto_generichash_blake2b_init(state, nil, 0, outputByteCount)
            crypto_generichash_blake2b_update(state, padBytes, UInt64(blockByteCount))
            for part in message {
                _ = part.withUnsafeBufferPointer { crypto_generichash_blake2b_update(state, $0.baseAddress, UInt64($0.count)) }
            }
            crypto_generichash_blake2b_final(state, innerHash.baseAddress!.assumingMemoryBound(to: UInt8.self), outputByteCount)

            fillPad(0x5c)
            crypto_generichash_blake2b_init(state, nil, 0, outputByteCount)
            crypto_generichash_blake2b_update(state, padBytes, UInt64(blockByteCount))
            crypto_generichash_blake2b_update(
                state, innerHash.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(outputByteCount))
            return SecureBytes(count: outputByteCount) { out in
                crypto_generichash_blake2b_final(state, out.baseAddress!.assumingMemoryBound(to: UInt8.self), outputByteCount)
            }
        }
    }

    /// Noise's HKDF(chaining_key, input_key_material, num_outputs) with num_outputs 2 or 3.
    public static func hkdf(chainingKey: SecureBytes, inputKeyMaterial: some ContiguousBytes, outputs: Int)
        -> [SecureBytes]
    {
        precondition(outputs == 2 || outputs == 3, "Noise HKDF makes two or three outputs")
        var ikm = inputKeyMaterial.withUnsafeBytes { [UInt8]($0) }
        defer { ikm.withUnsafeMutableBytes(secureZero) }
        let tempKey = hmac(key: chainingKey, ikm)
        let first = hmac(key: tempKey, [0x01])
        var firstBytes = first.withUnsafeBytes { [UInt8]($0) }
        defer { firstBytes.withUnsafeMutableBytes(secureZero) }
        let second = hmac(key: tempKey, firstBytes, [0x02])
        guard outputs == 3 else { return [first, second] }
        var secondBytes = second.withUnsafeBytes { [UInt8]($0) }
        defer { secondBytes.withUnsafeMutableBytes(secureZero) }
        let third = hmac(key: tempKey, secondBytes, [0x03])
        return [first, second, third]
    }
}
