import Synchronization
import WeftModel
import WeftSync

/// Operations received from peers and not yet stored: gathered for a flush interval, then
/// stored in one commit (one delivered receipt per conversation for all of them). Bounded:
/// the node stops reading its peers while `count` is at the limit.
final class UnstoredOperations: Sendable {
    struct Item: Sendable {
        var operation: SignedOperation
        var source: ConnectionNumber
    }

    private struct State: ~Copyable {
        var items: [Item] = []
        var closed = false
        var waitingStorer: CheckedContinuation<Void, Never>?
        var waitingForRoom: [CheckedContinuation<Void, Never>] = []
    }

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) { self.limit = limit }

    var count: Int { state.withLock { $0.items.count } }

    func add(_ operations: [SignedOperation], from source: ConnectionNumber) {
        let storer = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.closed else { return nil }
            state.items += operations.map { Item(operation: $0, source: source) }
            let storer = state.waitingStorer
            state.waitingStorer = nil
            return storer
        }
        storer?.resume()
    }

    /// Waits until there is something to store (or the node stops).
    func waitForOperations() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.closed || !state.items.isEmpty { return true }
                state.waitingStorer = continuation
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Takes up to `maximum` operations, oldest first.
    func take(_ maximum: Int) -> [Item] {
        state.withLock { state in
            let taken = Array(state.items.prefix(maximum))
            state.items.removeFirst(taken.count)
            return taken
        }
    }

    /// Stored: readers waiting for room go on if the count is under the limit.
    func stored() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.items.count < limit else { return [] }
            defer { state.waitingForRoom = [] }
            return state.waitingForRoom
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits while the count is at the limit.
    func waitForRoom() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.closed || state.items.count < limit { return true }
                state.waitingForRoom.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    func close() {
        let (storer, waiters) = state.withLock { state in
            state.closed = true
            defer {
                state.waitingStorer = nil
                state.waitingForRoom = []
            }
            return (state.waitingStorer, state.waitingForRoom)
        }
        storer?.resume()
        for waiter in waiters { waiter.resume() }
    }

    var isClosed: Bool { state.withLock { $0.closed } }
}
