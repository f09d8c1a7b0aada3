import Synchronization
import WeftModel
import WeftNode

/// The progress of one message part's transfer, or of several parts' together, as a node
/// reports it (`WeftClient.contentProgress(ofPart:in:)`, `contentProgress(of:)`).
///
/// Each value sums the parts: `verifiedBytes` and `totalBytes` are the sums of the parts'
/// bytes (so `fraction` weighs each part by its size), `wireBytes` and `bytesPerSecond` the
/// sums of theirs. The first value is what is known when iteration starts; then one for each
/// change. Verified bytes never go backwards: a part's are clamped to what it reported before,
/// and to its size. An inline part, and a content held whole, count whole at once.
///
/// The sequence ends once every part is whole here, after a last value whose `verifiedBytes`
/// is exactly `totalBytes` (its fraction exactly 1). It throws `contentUnavailable` if a part's
/// transfer failed or the node stopped first. A part that is not being fetched (on demand,
/// not asked for) keeps it waiting: ask for it with `WeftClient.downloadContent(ofPart:in:)`.
///
/// Each iterator follows the node's transfers afresh, and stops following them when it is
/// released or its task is cancelled (it then ends without throwing).
public struct ContentProgressSequence: AsyncSequence, Sendable {
    public typealias Element = ContentProgress
    public typealias Failure = WeftError

    /// One part: its size, and its content (nil: an inline part, whole already).
    struct Part: Sendable {
        let byteCount: UInt64
        let content: ContentDescriptor?
    }

    let parts: [Part]
    /// Where the content parts' transfers are followed (never nil when a part has content).
    let transfers: (any ContentTransfers)?

    /// A new iterator, which follows the parts' transfers from now on.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(parts: parts, transfers: transfers) }

    /// Follows the parts' transfers while it is held (see `ContentProgressSequence`).
    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Failure = WeftError

        private let parts: [Part]
        private let transfers: (any ContentTransfers)?
        private var following: Following?
        private var signals: AsyncStream<Void>.Iterator?
        private var last: ContentProgress?
        private var isOver = false

        init(parts: [Part], transfers: (any ContentTransfers)?) {
            self.parts = parts
            self.transfers = transfers
        }

        /// The next value: at once the first time, then once something changed; nil once the
        /// last value (exactly whole) was given, or the task is cancelled.
        public mutating func next() async throws(WeftError) -> ContentProgress? {
            try await next(isolation: nil)
        }

        /// `next()`, on the caller's actor.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(WeftError) -> ContentProgress? {
            guard !isOver else { return nil }
            if following == nil { start() }
            guard let following else { return nil }
            while true {
                let parts = following.snapshot()
                if parts.allSatisfy(\.isOver) { return try end(parts) }
                let sum = Self.sum(parts)
                if sum != last {
                    last = sum
                    return sum
                }
                // Woken by any part's change; nil: the task was cancelled.
                if await signals?.next(isolation: actor) == nil {
                    let parts = following.snapshot()
                    if parts.allSatisfy(\.isOver) { return try end(parts) }
                    isOver = true
                    return nil
                }
            }
        }

        /// Starts following each content part's transfer on the node.
        private mutating func start() {
            // Bounded: one pending signal at most; the iterator reads the states when woken.
            let (stream, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            following = Following.start(parts: parts, transfers: transfers, signal: signal)
            signals = stream.makeAsyncIterator()
        }

        /// Every part's transfer is over: the last value, exactly whole, if every part is
        /// whole; else why not.
        private mutating func end(_ parts: [Following.PartState]) throws(WeftError) -> ContentProgress? {
            isOver = true
            if let unfinished = parts.firstIndex(where: { !$0.isWhole }), let content = self.parts[unfinished].content {
                let status = transfers.map { "\($0.status(of: content.root))" } ?? "not followed"
                throw .contentUnavailable("its transfer stopped before it was whole here (\(status))", root: content.root)
            }
            var whole = Self.sum(parts)
            whole.verifiedBytes = whole.totalBytes
            whole.bytesPerSecond = 0
            guard whole != last else { return nil }
            last = whole
            return whole
        }

        /// The parts' progress summed.
        private static func sum(_ parts: [Following.PartState]) -> ContentProgress {
            ContentProgress.aggregate(parts.map(\.progress))
        }
    }
}

/// The node's transfers of a sequence's parts, followed by one task for as long as an
/// iterator holds this (it is cancelled on release); each change wakes the iterator.
private final class Following: Sendable {
    struct PartState: Sendable {
        var progress: ContentProgress
        /// Its stream ended: it is complete, failed, or the node stopped.
        var isOver: Bool
        /// Held whole here (checked once it is over).
        var isWhole: Bool
    }

    private let states: States
    private let task: Task<Void, Never>

    final class States: Sendable {
        let parts: Mutex<[PartState]>
        init(_ parts: [PartState]) { self.parts = Mutex(parts) }
    }

    private init(states: States, task: Task<Void, Never>) {
        self.states = states
        self.task = task
    }

    /// Follows each content part's transfer; `signal` is told of every change.
    static func start(
        parts: [ContentProgressSequence.Part], transfers: (any ContentTransfers)?, signal: AsyncStream<Void>.Continuation
    ) -> Following {
        // What is known now, so that the first value says it: an inline part is whole, and
        // so is content held whole; the stream of a content under way follows from there.
        let states = States(parts.map { part in
            let empty = ContentProgress(verifiedBytes: 0, totalBytes: part.byteCount)
            guard let content = part.content, let transfers else {
                return PartState(progress: ContentProgress(verifiedBytes: part.byteCount, totalBytes: part.byteCount), isOver: true, isWhole: true)
            }
            if transfers.status(of: content.root) == .complete {
                return PartState(progress: ContentProgress(verifiedBytes: part.byteCount, totalBytes: part.byteCount), isOver: true, isWhole: true)
            }
            let current = transfers.currentProgress(of: content.root).map { clamped($0, after: empty, size: part.byteCount) }
            return PartState(progress: current ?? empty, isOver: false, isWhole: false)
        })
        let initial = states.parts.withLock { $0 }
        // Unstructured on purpose: it lives as long as the iterator, which is no task's child.
        // `deinit` cancels it, which ends each `for await` below and so every watch.
        let task = Task {
            await withDiscardingTaskGroup { group in
                for (index, part) in parts.enumerated() {
                    guard let content = part.content, let transfers, !initial[index].isOver else { continue }
                    group.addTask {
                        for await progress in transfers.progress(of: content.root) {
                            states.parts.withLock { $0[index].progress = clamped(progress, after: $0[index].progress, size: content.byteCount) }
                            signal.yield()
                        }
                        if Task.isCancelled { return }
                        let isWhole = transfers.status(of: content.root) == .complete
                        states.parts.withLock { state in
                            state[index].isOver = true
                            state[index].isWhole = isWhole
                        }
                        signal.yield()
                    }
                }
            }
            signal.yield()
        }
        return Following(states: states, task: task)
    }

    deinit { task.cancel() }

    func snapshot() -> [PartState] { states.parts.withLock { $0 } }

    /// `new` as a part of `size` bytes that said `old` before reports it: verified bytes
    /// between the old ones and the size, wire bytes never fewer.
    static func clamped(_ new: ContentProgress, after old: ContentProgress, size: UInt64) -> ContentProgress {
        ContentProgress(
            verifiedBytes: max(old.verifiedBytes, min(new.verifiedBytes, size)), totalBytes: size,
            wireBytes: max(old.wireBytes, new.wireBytes), bytesPerSecond: max(0, new.bytesPerSecond))
    }
}
