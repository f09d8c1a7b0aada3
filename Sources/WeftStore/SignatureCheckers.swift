import Foundation
import WeftModel

/// Threads that check operation signatures at the lowest scheduling priority (nice 19).
///
/// Accepting received operations is a pipeline of two stages: checking signatures, which
/// spreads over the cores, and the store's writer, one thread. Checking at the same priority
/// as the writer took a third of the writer's core while both ran, and then left a core idle
/// while the writer finished alone. Below the writer, checking takes whatever the writer
/// leaves: the serial stage runs at full speed and the parallel one fills in around it (apply
/// 1,000 received messages, next batch checked meanwhile: p50 84–94 ms before, 73 ms with).
///
/// Linux keeps the nice value per thread, so only these threads run lower; each is lowered
/// once, when made (any user may lower a thread's priority, not every user may raise it back,
/// which is why pooled threads of Dispatch are not lowered and restored per batch). A thread
/// idle for a second ends, as Dispatch's do: a process whose main thread has exited waits for
/// its last thread.
// @unchecked Sendable: every mutable property (`waiting`, `threadCount`, and the batches'
// counters) is read and written only with `condition` locked. Bounded: at most one thread per
// core, and `waiting` holds only batches whose callers wait for them (suspended in `check`, or
// blocked in `checkBlocking`).
final class SignatureCheckers: @unchecked Sendable {
    /// One checker per core.
    static let shared = SignatureCheckers(threads: max(1, ProcessInfo.processInfo.activeProcessorCount))

    /// Operations checked per turn of a thread.
    static let chunkSize = 32

    /// Guards `waiting` and each batch's counters.
    private let condition = NSCondition()
    /// Batches with chunks not yet taken, oldest first.
    private var waiting: [Batch] = []
    /// Threads running, and how many there are at most.
    private var threadCount = 0
    private let maxThreads: Int

    private init(threads: Int) { maxThreads = threads }

    /// Starts a thread. Called with the lock held.
    private func startThread() {
        threadCount += 1
        let thread = Thread { [unowned self] in
            // The calling thread: on Linux, PRIO_PROCESS with 0 names the thread, not the process.
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
            self.run()
        }
        thread.name = "weft.signatures"
        thread.start()
    }

    /// Whether each signature verifies; an operation marked in `known` is reported valid
    /// without a check. Suspends the calling task, never blocking its thread: the thread that
    /// checks the last chunk resumes it. Cancelling the task does not stop the check.
    func check(_ operations: [SignedOperation], skipping known: [Bool]?) async -> [Bool] {
        guard !operations.isEmpty else { return [] }
        return await withCheckedContinuation { continuation in
            enqueue(Batch(operations: operations, known: known) { continuation.resume(returning: $0) })
        }
    }

    /// `check(_:skipping:)` that blocks the calling thread until every chunk is checked: never
    /// from async code (a thread of the cooperative pool blocked here is lost to every task).
    func checkBlocking(_ operations: [SignedOperation], skipping known: [Bool]?) -> [Bool] {
        guard !operations.isEmpty else { return [] }
        let done = DispatchSemaphore(value: 0)
        let outcome = BlockingOutcome()
        enqueue(Batch(operations: operations, known: known) { results in
            outcome.results = results
            done.signal()
        })
        done.wait()
        return outcome.results
    }

    /// Queues a batch for the threads, starting those it can use.
    private func enqueue(_ batch: Batch) {
        condition.lock()
        waiting.append(batch)
        while threadCount < min(maxThreads, batch.chunkCount) { startThread() }
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while waiting.isEmpty {
                if !condition.wait(until: Date(timeIntervalSinceNow: 1)) && waiting.isEmpty {
                    threadCount -= 1
                    condition.unlock()
                    return
                }
            }
            let batch = waiting[0]
            let chunk = batch.nextChunk
            batch.nextChunk += 1
            if batch.nextChunk == batch.chunkCount { waiting.removeFirst() }
            condition.unlock()

            batch.check(chunk)

            condition.lock()
            batch.remaining -= 1
            let finished = batch.remaining == 0
            condition.unlock()
            if finished { batch.finish() }
        }
    }

    /// The results a blocked caller reads once its batch is done.
    // @unchecked Sendable: written once by the thread that finishes the batch, before it
    // signals the semaphore; read by the caller only after the semaphore's wait returns.
    private final class BlockingOutcome: @unchecked Sendable {
        var results: [Bool] = []
    }

    /// One call's operations, checked a chunk at a time by whichever threads are free.
    // @unchecked Sendable: the counters change only under the pool's lock; each result is
    // written by the one thread that took its chunk, and read by the thread that finishes the
    // batch, after every chunk's thread took the lock to count itself done (which orders it).
    private final class Batch: @unchecked Sendable {
        let operations: [SignedOperation]
        let known: [Bool]?
        let chunkCount: Int
        var nextChunk = 0
        var remaining: Int
        /// Per operation, whether its signature verifies (false until its chunk is checked).
        private let results: UnsafeMutableBufferPointer<Bool>
        /// Called once, with the results, when the last chunk is checked.
        private let completion: @Sendable ([Bool]) -> Void

        init(operations: [SignedOperation], known: [Bool]?, completion: @escaping @Sendable ([Bool]) -> Void) {
            self.operations = operations
            self.known = known
            self.chunkCount = (operations.count + SignatureCheckers.chunkSize - 1) / SignatureCheckers.chunkSize
            self.remaining = chunkCount
            self.results = .allocate(capacity: operations.count)
            self.results.initialize(repeating: false)
            self.completion = completion
        }

        deinit { results.deallocate() }

        func check(_ chunk: Int) {
            let start = chunk * SignatureCheckers.chunkSize
            for index in start..<min(operations.count, start + SignatureCheckers.chunkSize) {
                results[index] = known?[index] == true || operations[index].hasValidSignature
            }
        }

        /// Hands the results to the caller: called by the thread that checked the last chunk.
        func finish() { completion(Array(results)) }
    }
}
