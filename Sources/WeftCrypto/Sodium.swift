private import CSodium

/// One-time libsodium initialisation. Every entry point that calls into libsodium touches
/// `Sodium.ready` first; `sodium_init` is idempotent and thread-safe, this just makes it lazy.
enum Sodium {
    static let ready: Void = {
        guard sodium_init() >= 0 else {
            fatalError("libsodium failed to initialise (sodium_init returned an error)")
        }
    }()
}

/// Fills `count` bytes from libsodium's CSPRNG.
public func secureRandomBytes(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { SystemRandomSource().fill($0) }
    return bytes
}

/// Compares two byte sequences in constant time (for equal lengths); lengths are not secret.
public func constantTimeEquals(_ a: some ContiguousBytes, _ b: some ContiguousBytes) -> Bool {
    _ = Sodium.ready
    return a.withUnsafeBytes { pa in
        b.withUnsafeBytes { pb in
            guard pa.count == pb.count else { return false }
            if pa.count == 0 { return true }
            return sodium_memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0
        }
    }
}

/// Wipes memory so that the compiler cannot optimise the store away.
func secureZero(_ pointer: UnsafeMutableRawBufferPointer) {
    guard let base = pointer.baseAddress, pointer.count > 0 else { return }
    sodium_memzero(base, pointer.count)
}

/// Lets Swift arrays, `SecureBytes` and raw buffers feed the same functions.
public protocol ContiguousBytes {
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ContiguousBytes where Element == UInt8 {}
extension ArraySlice: ContiguousBytes where Element == UInt8 {}
extension UnsafeRawBufferPointer: ContiguousBytes {
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(self)
    }
}
