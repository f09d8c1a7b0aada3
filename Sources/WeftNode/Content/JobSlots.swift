import DequeModule
import Synchronization

/// Room for a bounded number of jobs at once: `acquire` waits for a slot, `release` frees one.
final class JobSlots: Sendable {
    private struct State: ~Copyable {
        var free: Int
        var waiting = Deque<CheckedContinuation<Void, Never>>()
        var closed = false
    }

    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(free: max(1, count))) }

    /// Waits for a slot (returns at once, without one, once closed).
    func acquire() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.closed { return true }
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    func release() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiting.popFirst() { return waiter }
            state.free += 1
            return nil
        }
        waiter?.resume()
    }

    func close() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for waiter in waiters { waiter.resume() }
    }
}
