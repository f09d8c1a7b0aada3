import Synchronization
import WeftTransfer

/// zstd contexts for chunk frames, reused: a job on a pool thread takes an encoder or a
/// decoder, uses it alone, and gives it back. At most `limit` of each are kept idle (as many
/// as jobs run at once, in practice the pool's threads).
// @unchecked Sendable: the idle coders are only touched under `lock`; a coder taken out is used
// by the one job that took it until it gives it back, so no two threads ever share one.
final class ChunkCoders: @unchecked Sendable {
    private let lock = Mutex(())
    private var encoders: [ChunkFrameEncoder] = []
    private var decoders: [ChunkFrameDecoder] = []
    private let limit: Int

    init(limit: Int = 8) { self.limit = limit }

    /// Runs `body` with an encoder of its own.
    func withEncoder<T>(_ body: (ChunkFrameEncoder) throws -> T) rethrows -> T {
        let encoder = lock.withLock { _ in encoders.popLast() } ?? ChunkFrameEncoder()
        defer { lock.withLock { _ in if encoders.count < limit { encoders.append(encoder) } } }
        return try body(encoder)
    }

    /// Runs `body` with a decoder of its own.
    func withDecoder<T>(_ body: (ChunkFrameDecoder) throws -> T) rethrows -> T {
        let decoder = lock.withLock { _ in decoders.popLast() } ?? ChunkFrameDecoder()
        defer { lock.withLock { _ in if decoders.count < limit { decoders.append(decoder) } } }
        return try body(decoder)
    }
}
