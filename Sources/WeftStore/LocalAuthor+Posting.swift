import Synchronization
import WeftModel

// Group commit of posts: a message the local user sends is durable when `post` returns, and a
// commit (its fsync, the conversation read before it, the change published after it) costs
// far more than the message. Posts that arrive while a commit runs wait for the next one and
// share it: under load each transaction carries every post that came in meanwhile; alone, a
// post commits at once, as before.

/// A post accepted by `LocalAuthor.postShowing` and not yet committed.
struct WaitingPost: Sendable {
    typealias Outcome = Result<(post: SignedOperation, message: MessageSnapshot?), any Error>
    var body: OperationBody
    var log: ConversationID
    var timeToLive: UInt64
    /// Called once, with the commit's outcome for this post.
    var complete: @Sendable (Outcome) -> Void
}

/// The outcomes of a batch of posts, handed back together once the last one is known.
private final class PostOutcomes: Sendable {
    private let state: Mutex<(outcomes: [WaitingPost.Outcome?], left: Int)>
    private let continuation: CheckedContinuation<[WaitingPost.Outcome], Never>

    init(count: Int, continuation: CheckedContinuation<[WaitingPost.Outcome], Never>) {
        state = Mutex((Array(repeating: nil, count: count), count))
        self.continuation = continuation
    }

    func complete(_ index: Int, _ outcome: WaitingPost.Outcome) {
        let all: [WaitingPost.Outcome]? = state.withLock { state in
            state.outcomes[index] = outcome
            state.left -= 1
            return state.left == 0 ? state.outcomes.map { $0! } : nil
        }
        if let all { continuation.resume(returning: all) }
    }
}

/// The posts waiting for a commit, and whether a committer is running.
struct PostQueue: ~Copyable {
    var waiting: [WaitingPost] = []
    var isCommitting = false
}

extension LocalAuthor {
    /// `post(_:options:in:timeToLive:)`, handing back the message as the commit wrote it too,
    /// so the caller need not read it again (nil only if the commit did not show it).
    ///
    /// Concurrent posts are committed together (in the order they came, each the next in the
    /// author's chain of its log); each returns once the transaction holding it committed. A
    /// group whose commit fails is committed post by post, so only a post that fails alone
    /// throws.
    public func postShowing(
        _ parts: [MessagePart], options: MessageOptions = MessageOptions(), in log: ConversationID,
        timeToLive: UInt64 = OutboxEntry.defaultTimeToLive
    ) async throws -> (post: SignedOperation, message: MessageSnapshot?) {
        let body = OperationBody.postMessage(parts: parts, options: options)
        try Self.checkLimits(body)
        return try await withCheckedThrowingContinuation { continuation in
            enqueue([WaitingPost(body: body, log: log, timeToLive: timeToLive) { continuation.resume(with: $0) }])
        }
    }

    /// A message to post with `postShowing(_:)`.
    public struct Posting: Sendable {
        public var parts: [MessagePart]
        public var options: MessageOptions
        public var log: ConversationID
        public var timeToLive: UInt64

        public init(_ parts: [MessagePart], options: MessageOptions = MessageOptions(), in log: ConversationID, timeToLive: UInt64 = OutboxEntry.defaultTimeToLive) {
            self.parts = parts
            self.options = options
            self.log = log
            self.timeToLive = timeToLive
        }
    }

    /// Posts several messages as `postShowing(_:options:in:timeToLive:)` posts one, queued
    /// together (so the messages of one log take consecutive places in the author's chain, in
    /// the order given) and committed with whatever else waits; returns each one's outcome, in
    /// order, once all are known. One that fails (its limits, or its commit alone) leaves the others.
    public func postShowing(_ postings: [Posting]) async -> [Result<(post: SignedOperation, message: MessageSnapshot?), any Error>] {
        var outcomes = [WaitingPost.Outcome?](repeating: nil, count: postings.count)
        var accepted: [(index: Int, body: OperationBody)] = []
        for (index, posting) in postings.enumerated() {
            let body = OperationBody.postMessage(parts: posting.parts, options: posting.options)
            do {
                try Self.checkLimits(body)
                accepted.append((index, body))
            } catch {
                outcomes[index] = .failure(error)
            }
        }
        guard !accepted.isEmpty else { return outcomes.map { $0! } }
        let committed = await withCheckedContinuation { continuation in
            let collected = PostOutcomes(count: accepted.count, continuation: continuation)
            enqueue(accepted.enumerated().map { slot, item in
                WaitingPost(body: item.body, log: postings[item.index].log, timeToLive: postings[item.index].timeToLive) {
                    collected.complete(slot, $0)
                }
            })
        }
        for (item, outcome) in zip(accepted, committed) { outcomes[item.index] = outcome }
        return outcomes.map { $0! }
    }

    /// Queues posts for the next group commit, starting a committer if none runs.
    private func enqueue(_ waiting: [WaitingPost]) {
        let lead = posts.withLock { queue in
            queue.waiting.append(contentsOf: waiting)
            defer { queue.isCommitting = true }
            return !queue.isCommitting
        }
        // The committer runs on its own, so no caller waits for posts after its own.
        // Bounded: `isCommitting` admits one committer at a time, and it ends once no post
        // waits (every waiting post is completed by it, committed or failed).
        if lead { Task { await self.commitWaitingPosts() } }
    }

    /// Commits the waiting posts, a group at a time, until none wait.
    private func commitWaitingPosts() async {
        while true {
            let group = posts.withLock { queue in
                defer { queue.waiting = [] }
                if queue.waiting.isEmpty { queue.isCommitting = false }
                return queue.waiting
            }
            guard !group.isEmpty else { return }
            do {
                let results = try await commit(group)
                for (post, result) in zip(group, results) { post.complete(.success(result)) }
            } catch where group.count > 1 {
                for post in group {
                    do {
                        post.complete(.success(try await commit([post])[0]))
                    } catch {
                        post.complete(.failure(error))
                    }
                }
            } catch {
                group[0].complete(.failure(error))
            }
        }
    }

    /// One transaction for `group`: its messages and outbox entries.
    private func commit(_ group: [WaitingPost]) async throws -> [(post: SignedOperation, message: MessageSnapshot?)] {
        let now = wallClock()
        // The posts of each log, in the order they came.
        var byLog: [(log: ConversationID, indices: [Int])] = []
        for (index, post) in group.enumerated() {
            if let slot = byLog.firstIndex(where: { $0.log == post.log }) {
                byLog[slot].indices.append(index)
            } else {
                byLog.append((post.log, [index]))
            }
        }
        let logs = byLog
        let (applied, written) = try await store.commitLocal { replica in
            var written = [SignedOperation?](repeating: nil, count: group.count)
            self.author.withLock { author in
                for (log, indices) in logs {
                    let chain = author.write(indices.map { group[$0].body }, in: log, replica: replica, wallMilliseconds: now)
                    for (index, signed) in zip(indices, chain) { written[index] = signed }
                }
            }
            let operations = written.map { $0! }
            let outbox = zip(operations, group).map { OutboxEntry(posting: $0, createdAt: now, timeToLive: $1.timeToLive) }
            return (Store.LocalBatch(operations: operations, outbox: outbox), operations)
        }
        var snapshots: [OperationID: MessageSnapshot] = [:]
        for change in applied.changes.messages { if let snapshot = change.snapshot { snapshots[change.id] = snapshot } }
        return written.map { ($0, snapshots[$0.id]) }
    }
}
