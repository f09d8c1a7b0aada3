import DequeModule
import Synchronization
import WeftSync

/// What the sync core's driver takes from its queue (`SyncEventQueue`).
enum SyncDriverItem: Sendable {
    case event(SyncEvent)
    /// A question about the core, answered by the driver between two events; with nil if the
    /// queue closes first.
    case inspect(@Sendable (SyncCore?) -> Void)
}

/// The one way into a node's sync core (`Replicator.drive`).
typealias SyncEventQueue = DriverQueue<SyncDriverItem>

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
