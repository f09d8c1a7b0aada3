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
    /// later one comes after a commit that altered the results.
    nonisolated public func liveQuery(_ query: ConversationQuery) -> LiveQuery<Conversation> {
        LiveQuery(changes: store.changes(), run: { client in try await client.conversations(query) }, client: self)
    }

    /// A live query over messages.
    nonisolated public func liveQuery(_ query: MessageQuery) -> LiveQuery<Message> {
        LiveQuery(changes: store.changes(), run: { client in try await client.messages(query) }, client: self)
    }
}

/// The updates of a live query. Pull-based: the query runs again when the consumer asks for the
/// next update and a commit happened since, so nothing piles up behind a slow consumer but the
/// store's bounded change buffer (and a batch lost from it changes nothing: the query re-runs).
/// Subscribed when created: commits after that are not missed.
public struct LiveQuery<Result: Sendable & Equatable & Identifiable>: AsyncSequence, Sendable {
    public typealias Element = LiveQueryUpdate<Result>
    public typealias Failure = any Error

    let changes: ChangeStream
    let run: @Sendable (WeftClient) async throws -> [Result]
    let client: WeftClient

    public func makeAsyncIterator() -> Iterator {
        Iterator(changes: changes.makeAsyncIterator(), run: run, client: client)
    }

    public struct Iterator: AsyncIteratorProtocol {
        var changes: ChangeStream.Iterator
        let run: @Sendable (WeftClient) async throws -> [Result]
        let client: WeftClient
        var current: [Result]?

        public mutating func next() async throws -> LiveQueryUpdate<Result>? {
            guard let previous = current else {
                let first = try await run(client)
                current = first
                return LiveQueryUpdate.diff(from: [], to: first, key: \.id)
            }
            var last = previous
            while await changes.next() != nil {
                let next = try await run(client)
                let update = LiveQueryUpdate.diff(from: last, to: next, key: \.id)
                last = next
                current = next
                if !update.isEmpty { return update }
            }
            return nil
        }
    }
}
