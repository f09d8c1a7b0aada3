private import CSodium
import Synchronization

/// Where a sans-I/O core draws its random bytes (the handshake's ephemeral keys).
///
/// Nodes use `SystemRandomSource`, libsodium's CSPRNG. A simulator or a test passes a
/// `SeededRandomSource` instead, so the same seeds replay the same bytes on the wire.
public protocol RandomSource: Sendable {
    /// Fills every byte of `buffer`.
    func fill(_ buffer: UnsafeMutableRawBufferPointer)
}

extension RandomSource {
    /// `count` random bytes, drawn straight into wiped-on-free memory.
    public func secret(count: Int) -> SecureBytes {
        SecureBytes(count: count) { fill($0) }
    }
}

/// libsodium's CSPRNG (`randombytes_buf`): the source everywhere outside simulations and tests.
public struct SystemRandomSource: RandomSource {
    public init() {}

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        _ = Sodium.ready
        randombytes_buf(base, buffer.count)
    }
}

/// A reproducible stream of bytes for simulations and tests: the same seed yields the same
/// draws, in the same order. Never use it for keys that protect anything.
///
/// Draw `n` (counting from 0) is ChaCha20 output (libsodium's `randombytes_buf_deterministic`)
/// keyed by BLAKE2b-256(seed || u64 n), so a draw depends only on the seed and its position,
/// whatever the sizes of the draws before it.
public final class SeededRandomSource: RandomSource {
    private let seed: SecureBytes
    /// How many draws were made; a lock makes concurrent draws safe (each gets its own `n`).
    private let drawCount = Mutex<UInt64>(0)

    /// A source for any seed bytes (hashed, so any length will do).
    public init(seed: some ContiguousBytes) {
        let bytes = seed.withUnsafeBytes { [UInt8]($0) }
        self.seed = SecureBytes(copying: BLAKE2b.hash(bytes, outputByteCount: Int(randombytes_SEEDBYTES)))
    }

    /// A source for a small numeric seed, convenient in tests (`SeededRandomSource(seed: 1)`).
    public convenience init(seed: UInt64) {
        self.init(seed: withUnsafeBytes(of: seed.bigEndian) { [UInt8]($0) })
    }

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        let draw = drawCount.withLock { count in
            defer { count += 1 }
            return count
        }
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        var position = withUnsafeBytes(of: draw.bigEndian) { [UInt8]($0) }
        var drawSeed = seed.withUnsafeBytes { [UInt8]($0) } + position
        defer {
            drawSeed.withUnsafeMutableBytes(secureZero)
            position.withUnsafeMutableBytes(secureZero)
        }
        var key = BLAKE2b.hash(drawSeed, outputByteCount: Int(randombytes_SEEDBYTES))
        defer { key.withUnsafeMutableBytes(secureZero) }
        randombytes_buf_deterministic(base, buffer.count, key)
    }
}
