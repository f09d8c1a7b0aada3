import Foundation
import Synchronization
import Testing
import Weft
import WeftCrypto
import WeftModel
import WeftStore

/// A wall clock the test moves by hand (milliseconds since 1970).
final class TestClock: Sendable {
    private let now = Mutex<UInt64>(1_700_000_000_000)
    func read() -> UInt64 { now.withLock { $0 } }
    func advance(_ milliseconds: UInt64) { now.withLock { $0 += milliseconds } }
}

/// A client over an in-memory store, with its own identity.
func makeClient(clock: TestClock = TestClock()) throws -> WeftClient {
    let identity = NodeIdentity.generate()
    let store = try Store(directory: nil, localUser: identity.publicKey)
    return try WeftClient(store: store, identity: identity, wallClock: { clock.read() })
}

/// Replication by hand: everything `from` holds in `conversations` goes to `to`.
func sync(_ from: WeftClient, to: WeftClient) async throws {
    var operations: [SignedOperation] = []
    for conversation in try from.store.replica.conversationIDs {
        let snapshot = try #require(try await from.conversation(conversation))
        for log in [snapshot.id] + snapshot.mergedIdentifiers {
            operations += try from.store.operations(in: log)
        }
    }
    try await to.receive(operations)
}

/// Collects change batches from a client in the background.
final class ChangeLog: Sendable {
    private final class Batches: Sendable {
        let value = Mutex<[ObjectChanges]>([])
    }

    private let batches = Batches()
    private let store: Store
    private let task: Task<Void, Never>

    init(_ client: WeftClient) {
        let stream = client.changes()
        let batches = self.batches
        store = client.store
        task = Task { for await batch in stream { batches.value.withLock { $0.append(batch) } } }
    }

    deinit { task.cancel() }

    var all: [ObjectChange] { batches.value.withLock { $0.flatMap { $0 } } }
    var received: [ObjectChanges] { batches.value.withLock { $0 } }
    func clear() { batches.value.withLock { $0.removeAll() } }

    /// Waits (polling, up to 10 s) until the background task has received every batch the
    /// store published so far.
    func settle(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let target = store.latestChangeNumber
        let deadline = ContinuousClock.now + .seconds(10)
        while (batches.value.withLock { $0.last?.number ?? 0 }) < target {
            guard ContinuousClock.now < deadline else {
                Issue.record("the change stream did not deliver batch \(target) within 10 s", sourceLocation: sourceLocation)
                return
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }
}
