import DequeModule
import Synchronization
import WeftSync

/// The one way into a node's sync core: events in order, for the one task that owns the core
/// (`Replicator.drive`), as NIOSSHHandler's state machine sees only its event loop.
///
/// Bounded: at most `capacity` items wait. A producer (the connections' reader, the storer,
/// the writers, the timers) waits for room, so a core that falls behind slows what feeds it
/// (the connections then stop being read) instead of queueing without end. The driver never
/// waits on a producer, so waiting here cannot deadlock: events its own actions raise it
/// handles at once, without this queue.
final class SyncEventQueue: Sendable {
    enum Item: Sendable {
        case event(SyncEvent)
        /// A question about the core, answered by the driver between two events; with nil if
        /// the queue closes first.
        case inspect(@Sendable (SyncCore?) -> Void)
    }

    private struct State: ~Copyable {
        var items = Deque<Item>()
        var closed = false
        /// The driver, waiting for an item.
        var consumer: CheckedContinuation<Item?, Never>?
        /// Producers waiting for room, oldest first.
        var producers = Deque<CheckedContinuation<Void, Never>>()
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Queues `item`, waiting while the queue is full. Returns false, dropping it, once the
    /// queue is closed (the node stopped).
    @discardableResult
    func send(_ item: Item) async -> Bool {
        while true {
            enum Outcome { case queued(CheckedContinuation<Item?, Never>?), closed, full }
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

    /// The next item, waiting for one; nil once closed.
    func next() async -> Item? {
        await withCheckedContinuation { continuation in
            let (item, producer) = state.withLock { state -> (Item??, CheckedContinuation<Void, Never>?) in
                if let item = state.items.popFirst() { return (.some(item), state.producers.popFirst()) }
                if state.closed { return (.some(nil), nil) }
                state.consumer = continuation
                // Room for everyone waiting: each producer retries.
                return (nil, state.producers.popFirst())
            }
            producer?.resume()
            if let item { continuation.resume(returning: item) }
        }
    }

    /// Ends the queue: items still queued are dropped (questions answered with nil), waiting
    /// producers go on (their items dropped), the driver's `next()` returns nil.
    func close() {
        let (consumer, producers, dropped) = state.withLock { state in
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
        for case .inspect(let question) in dropped { question(nil) }
    }

    var isClosed: Bool { state.withLock { $0.closed } }
}

/// The answer to one question to the driver (`Replicator.inspect`), waited for.
final class InspectionAnswer<Value: Sendable>: Sendable {
    private struct State: ~Copyable {
        var answer: Value??
        var waiting: CheckedContinuation<Value?, Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Gives the answer (nil: the queue closed before the driver saw the question).
    func give(_ answer: Value?) {
        let waiting = state.withLock { state -> CheckedContinuation<Value?, Never>? in
            guard state.answer == nil else { return nil }
            state.answer = .some(answer)
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume(returning: answer)
    }

    /// Waits for the answer.
    func value() async -> Value? {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> Value?? in
                if let answer = state.answer { return .some(answer) }
                state.waiting = continuation
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}
