/// Secret bytes (keys, seeds, chaining keys) held in memory that is wiped when freed.
///
/// The value is immutable once built; copies share one storage, which is wiped
/// (`sodium_memzero`) when the last copy goes away. Equality is constant-time. The bytes never
/// appear in `description`, so a secret cannot leak into a log line by accident.
public struct SecureBytes: Sendable, Equatable, ContiguousBytes, CustomStringConvertible {
    private let storage: Storage

    /// Builds `count` secret bytes by letting `fill` write them in place.
    public init(count: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        let storage = Storage(count: count)
        try fill(storage.mutableBytes)
        self.storage = storage
    }

    /// Builds a secret of at most `capacity` bytes read in pieces (a file, a terminal line):
    /// `fill` writes into the whole capacity and returns how many bytes the secret keeps. The
    /// whole capacity is wiped when freed, so input never passes through memory that is not.
    public init(capacity: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows {
        let storage = Storage(count: capacity)
        let kept = try fill(storage.mutableBytes)
        precondition((0...capacity).contains(kept), "fill kept \(kept) bytes of a \(capacity)-byte capacity")
        storage.count = kept
        self.storage = storage
    }

    /// Copies `bytes` into wiped-on-free memory. Wipe your own copy if you own it.
    public init(copying bytes: some ContiguousBytes) {
        let count = bytes.withUnsafeBytes { $0.count }
        self.init(count: count) { target in
            bytes.withUnsafeBytes { source in
                if count > 0 { target.copyMemory(from: source) }
            }
        }
    }

    /// `count` bytes from libsodium's CSPRNG, drawn in place (no copy to wipe).
    public static func random(count: Int) -> SecureBytes {
        SystemRandomSource().secret(count: count)
    }

    public var count: Int { storage.count }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage.mutableBytes))
    }

    /// A prefix of the secret, as a new secret.
    public func prefix(_ length: Int) -> SecureBytes {
        precondition(length <= count, "prefix longer than the secret")
        return withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0.prefix(length))) }
    }

    public var description: String { "SecureBytes(\(count) bytes, redacted)" }

    /// Constant-time comparison.
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        constantTimeEquals(lhs, rhs)
    }

    /// Heap storage at a stable address; wiped over its whole capacity in `deinit`.
    ///
    /// `@unchecked Sendable`: the bytes and `count` are written only inside `SecureBytes.init`,
    /// before the storage is shared, and are read-only afterwards.
    private final class Storage: @unchecked Sendable {
        /// The whole allocation; at least one byte so the pointer is always valid.
        private let allocation: UnsafeMutableRawBufferPointer
        /// The secret's length, at most the allocation's.
        var count: Int

        var mutableBytes: UnsafeMutableRawBufferPointer {
            UnsafeMutableRawBufferPointer(rebasing: allocation[0..<count])
        }

        init(count: Int) {
            _ = Sodium.ready
            self.count = count
            allocation = .allocate(byteCount: max(count, 1), alignment: 16)
            allocation.initializeMemory(as: UInt8.self, repeating: 0)
        }

        deinit {
            secureZero(allocation)
            allocation.deallocate()
        }
    }
}
