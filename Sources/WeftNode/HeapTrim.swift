#if canImport(Glibc)
import Glibc
#endif

/// Gives the memory the C allocator keeps free back to the system.
///
/// glibc's malloc keeps what a program frees in its arenas (one per thread that allocated),
/// so a node that held the buffers of a peer that never read (a megabyte of outbox, reads in
/// flight, the channel's pending writes, across every cooperative thread's arena) stays that
/// large after the peer leaves, though nothing uses the memory. `malloc_trim(0)` returns the
/// free pages of every arena. It is looked up at run time: Swift's Glibc module does not
/// declare it (`malloc.h`), and another C library may not have it; then this does nothing.
public enum HeapTrim {
    private typealias Trim = @convention(c) (Int) -> Int32

    private static let trim = cFunction("malloc_trim", as: Trim.self)

    private typealias Option = @convention(c) (Int32, Int32) -> Int32

    private static let option = cFunction("mallopt", as: Option.self)

    /// The C library's function `name`, looked up at run time, as a `T`.
    private static func cFunction<T>(_ name: String, as: T.Type) -> T? {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else { return nil }
        return unsafeBitCast(symbol, to: T.self)
        #else
        return nil
        #endif
    }

    /// Keeps the buffers a transfer frees for the next ones, instead of giving them back to
    /// the system and taking them again: chunk buffers (256 KiB and more) are otherwise mapped
    /// and unmapped one by one, and threads' heaps trimmed as they free, so every chunk pays
    /// for page faults and zeroed pages. Blocks under 4 MiB come from the heap, and the heap is
    /// trimmed only past 16 MiB free, or when `giveBack` is called. A node calls it once, as
    /// it starts. Whether the allocator took it.
    @discardableResult
    public static func keepFreedBuffers() -> Bool {
        guard let option else { return false }
        let trimThreshold: Int32 = -1, mmapThreshold: Int32 = -3  // malloc.h's M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
        return option(mmapThreshold, 4 << 20) == 1 && option(trimThreshold, 16 << 20) == 1
    }

    /// Returns free memory to the system; whether the allocator could do it here.
    @discardableResult
    static func giveBack() -> Bool {
        guard let trim else { return false }
        _ = trim(0)
        return true
    }
}
