import Foundation

/// Runs CPU-bound work on a thread of its own instead of the cooperative pool, and waits for it.
///
/// The pool has one thread per core (two here). A synchronous test that computes for tens of
/// seconds holds one of them the whole time; two such tests stall every async test running
/// beside them, such as the loopback nodes whose deadlines then pass with nothing scheduled.
/// Record issues from the result, back in the test: the thread has no test context.
func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
