import WeftModel
import WeftStore

/// One step of a live query: the results now, and how they moved since the last step
/// (the SDK's query controller: inserts, moves, deletes, updates).
public struct LiveQueryUpdate<Result: Sendable & Equatable>: Sendable, Equatable {
    public struct Move: Sendable, Equatable {
        public var from: Int
        public var to: Int

        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }
    }

    public var results: [Result]
    /// Indices in `results` of objects that were not in the previous results.
    public var inserts: [Int]
    /// Indices in the previous results of objects no longer present.
    public var deletes: [Int]
    /// Objects present before and now at another index.
    public var moves: [Move]
    /// Indices in `results` of objects present before, at the same place, with other content.
    public var updates: [Int]

    /// The step from `previous` (by identity `key`) to `results`.
    static func diff<Key: Hashable>(from previous: [Result], to results: [Result], key: (Result) -> Key) -> Self {
        let oldIndex = Dictionary(previous.enumerated().map { (key($0.element), $0.offset) }, uniquingKeysWith: { a, _ in a })
        let newKeys = Set(results.map(key))
        var update = LiveQueryUpdate(results: results, inserts: [], deletes: [], moves: [], updates: [])
        for (index, old) in previous.enumerated() where !newKeys.contains(key(old)) { update.deletes.append(index) }
        for (index, result) in results.enumerated() {
            guard let before = oldIndex[key(result)] else {
                update.inserts.append(index)
                continue
            }
            if before != index {
                update.moves.append(Move(from: before, to: index))
            } else if previous[before] != result {
                update.updates.append(index)
            }
        }
        return update
    }

    var isEmpty: Bool { inserts.isEmpty && deletes.isEmpty && moves.isEmpty && updates.isEmpty }
}

extension WeftClient {
    /// A live query over conversations: the first update holds every result as an insert; each
    /// later one comes after a change that altered the results.
    public func liveQuery(_ query: ConversationQuery) -> AsyncThrowingStream<LiveQueryUpdate<Conversation>, any Error> {
        live { client in try await client.conversations(query) } key: { $0.id }
    }

    /// A live query over messages.
    public func liveQuery(_ query: MessageQuery) -> AsyncThrowingStream<LiveQueryUpdate<Message>, any Error> {
        live { client in try await client.messages(query) } key: { $0.id }
    }

    private func live<Result: Sendable & Equatable, Key: Hashable>(
        _ run: @escaping @Sendable (WeftClient) async throws -> [Result], key: @escaping @Sendable (Result) -> Key
    ) -> AsyncThrowingStream<LiveQueryUpdate<Result>, any Error> {
        let (changes, subscription) = subscribe()
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    var current = try await run(self)
                    continuation.yield(LiveQueryUpdate.diff(from: [], to: current, key: key))
                    for await _ in changes {
                        let next = try await run(self)
                        let update = LiveQueryUpdate.diff(from: current, to: next, key: key)
                        current = next
                        if !update.isEmpty { continuation.yield(update) }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in
                task.cancel()
                Task { await self.unsubscribe(subscription) }
            }
        }
    }
}
