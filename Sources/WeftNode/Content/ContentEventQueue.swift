import DequeModule
import Synchronization

/// The one way into the content service's download driver: events in order, for the one task
/// that owns the transfer scheduler (`ContentService.drive`).
///
/// Bounded: at most `capacity` events wait; a producer (the connections' reader, the jobs that
/// verify chunks, the timer, clients) waits for room. The driver never waits on a producer,
/// so waiting here cannot deadlock.
final class ContentEventQueue<Item: Sendable>: Sendable {
    private struct State: ~Copyable {
        var items = Deque<Item>()
        var closed = false
        var consumer: CheckedContinuation<Item?, Never>?
        var producers = Deque<CheckedContinuation<Void, Never>>()
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Queues `item`, waiting while the queue is full. False (the item dropped) once closed.
    private enum Outcome { case queued(CheckedContinuation<Item?, Never>?), closed, full }

    @discardableResult
    func send(_ item: Item) async -> Bool {
        while true {
            var outcome = Outcome.full
            await withCheckedContinuation { (wait: CheckedContinuation<Void, Never>) in
                let result = state.withLock { state -> Outcome in
                    if state.closed { return .closed }
                    if let consumer = state.consumer {
                        state.consumer = nil
                        return .queued(consumer)
                    }
                    guard state.items.count < capacity else {
                        state.producers.append(wait)
                        return .full
                    }
                    state.items.append(item)
                    return .queued(nil)
                }
                outcome = result
                switch result {
                case .queued(let consumer):
                    consumer?.resume(returning: item)
                    wait.resume()
                case .closed:
                    wait.resume()
                case .full:
                    break  // resumed by `next()` once there is room, or by `close()`
                }
            }
            switch outcome {
            case .queued: return true
            case .closed: return false
            case .full: continue
            }
        }
    }

    /// Queues `item` if there is room, without waiting; false (dropped) if full or closed.
    @discardableResult
    func offer(_ item: Item) -> Bool {
        let (queued, consumer) = state.withLock { state -> (Bool, CheckedContinuation<Item?, Never>?) in
            if state.closed { return (false, nil) }
            if let consumer = state.consumer {
                state.consumer = nil
                return (true, consumer)
            }
            guard state.items.count < capacity else { return (false, nil) }
            state.items.append(item)
            return (true, nil)
        }
        consumer?.resume(returning: item)
        return queued
    }

    /// The next item, waiting for one; nil once closed.
    func next() async -> Item? {
        await withCheckedContinuation { continuation in
            let (item, producer) = state.withLock { state -> (Item??, CheckedContinuation<Void, Never>?) in
                if let item = state.items.popFirst() { return (.some(item), state.producers.popFirst()) }
                if state.closed { return (.some(nil), nil) }
                state.consumer = continuation
                return (nil, state.producers.popFirst())
            }
            producer?.resume()
            if let item { continuation.resume(returning: item) }
        }
    }

    /// Ends the queue: what waits is dropped, producers go on, `next()` returns nil.
    func close() {
        let (consumer, producers) = state.withLock { state in
            state.closed = true
            defer {
                state.items.removeAll()
                state.consumer = nil
                state.producers.removeAll()
            }
            return (state.consumer, state.producers)
        }
        consumer?.resume(returning: nil)
        for producer in producers { producer.resume() }
    }
}

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
