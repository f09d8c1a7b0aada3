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
enum HeapTrim {
    private typealias Trim = @convention(c) (Int) -> Int32

    private static let trim: Trim? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: Trim.self)
        #else
        return nil
        #endif
    }()

    /// Returns free memory to the system; whether the allocator could do it here.
    @discardableResult
    static func giveBack() -> Bool {
        guard let trim else { return false }
        _ = trim(0)
        return true
    }
}
