import DequeModule
import Synchronization

/// The one way into a sans-I/O core's driver: items in order, for the one task that owns the
/// core, as NIOSSHHandler's state machine sees only its event loop. The sync core's
/// (`Replicator.drive`) and the transfer scheduler's (`ContentService.drive`) each have one.
///
/// Bounded: at most `capacity` items wait. A producer (the connections' reader, the storer,
/// the jobs, the timers, clients) waits for room, so a core that falls behind slows what
/// feeds it instead of queueing without end. The driver never waits on a producer, so
/// waiting here cannot deadlock: what its own actions raise it handles at once, without this
/// queue.
final class DriverQueue<Item: Sendable>: Sendable {
    private struct State: ~Copyable {
        var items = Deque<Item>()
        var closed = false
        var consumer: CheckedContinuation<Item?, Never>?
        var producers = Deque<CheckedContinuation<Void, Never>>()
    }

    let capacity: Int
    private let state = Mutex(State())
    /// Told of each item still queued when the queue closes (a question is answered with nil).
    private let dropped: @Sendable (Item) -> Void

    init(capacity: Int, dropped: @escaping @Sendable (Item) -> Void = { _ in }) {
        self.capacity = max(1, capacity)
        self.dropped = dropped
    }

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

    /// Ends the queue: what waits is dropped (each told to `dropped`), waiting producers go on
    /// (their items dropped), the driver's `next()` returns nil.
    func close() {
        let (consumer, producers, items) = state.withLock { state in
            state.closed = true
            defer {
                state.items.removeAll()
                state.consumer = nil
                state.producers.removeAll()
            }
            return (state.consumer, state.producers, state.items)
        }
        consumer?.resume(returning: nil)
        for producer in producers { producer.resume() }
        for item in items { dropped(item) }
    }

    var isClosed: Bool { state.withLock { $0.closed } }
}

