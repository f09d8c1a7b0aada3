import Synchronization
import WeftModel
import WeftTransfer

/// What the content service says of each content it moves: its status and progress, for
/// `ContentService.status(of:)` and `progress(of:)`. The download driver and the servers write
/// it; readers only read. Progress never goes backwards: every update is clamped to what was
/// said before.
///
/// Bounded: at most `maxEntries` contents; past it, one that is over (complete or failed) and
/// watched by nobody is forgotten (its status is then read from the disk again).
///
/// Content added here arrives marked in `PendingUploads` already (the import marks it before
/// naming it); when such content has been sent whole, the board tells `onSentWhole`, which
/// removes the mark.
final class ContentBoard: Sendable {
    static let maxEntries = 4_096

    struct Entry {
        var status: ContentTransferStatus
        var progress: ContentProgress
        /// For content added here: the chunks sent at least once, and the content's layout.
        var upload: (sent: TransferChunkSet, descriptor: ContentDescriptor)?
        /// The rate's window: when it began, and the wire bytes then.
        var windowStart: ContinuousClock.Instant
        var windowBytes: UInt64
        var watchers: [UInt64: AsyncStream<ContentProgress>.Continuation] = [:]
        var touched: UInt64
        /// A download being opened: what it holds is not read yet (a restart may have left
        /// much of it), so its progress is told to nobody until the next change says it.
        var isOpening = false

        /// Complete or failed: nothing more will be said.
        var isFinished: Bool {
            switch status {
            case .complete, .failed: true
            case .awaitingUpload, .uploading, .readyForDownload, .downloading, .paused: false
            }
        }

        var isOver: Bool {
            switch status {
            case .complete, .failed, .readyForDownload: true
            case .awaitingUpload, .uploading, .downloading, .paused: false
            }
        }
    }

    private struct State {
        var entries: [ContentRoot: Entry] = [:]
        var clock: UInt64 = 0
        var nextWatcher: UInt64 = 0
        /// The service stopped: watchers are finished, and new ones at once.
        var isClosed = false
    }

    private let state = Mutex(State())

    /// Told of content added here once every chunk of it was sent at least once: under the
    /// lock, so it must not block (nor call the board).
    private let onSentWhole: @Sendable (ContentRoot) -> Void

    init(onSentWhole: @escaping @Sendable (ContentRoot) -> Void = { _ in }) {
        self.onSentWhole = onSentWhole
    }

    // MARK: - Reading

    func status(of root: ContentRoot) -> ContentTransferStatus? { state.withLock { $0.entries[root]?.status } }

    func progress(of root: ContentRoot) -> ContentProgress? {
        state.withLock { state in state.entries[root].flatMap { $0.isOpening ? nil : $0.progress } }
    }

    /// Whether the content was added here (this run): it is held whole, and its status tells
    /// of its upload.
    func isUpload(_ root: ContentRoot) -> Bool { state.withLock { $0.entries[root]?.upload != nil } }

    /// A stream of the content's progress: what is known now, then every change, until the
    /// content is complete or failed. `initial` is what to start from when nothing is known.
    func watch(_ root: ContentRoot, initial: ContentProgress?, isOver: Bool) -> AsyncStream<ContentProgress> {
        // Bounded: a watcher that reads slowly gets the latest progress, never a backlog.
        let (stream, continuation) = AsyncStream<ContentProgress>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> UInt64? in
            if state.isClosed {
                if let progress = state.entries[root]?.progress ?? initial { continuation.yield(progress) }
                return nil
            }
            if let entry = state.entries[root] {
                if !entry.isOpening { continuation.yield(entry.progress) }
                if entry.isFinished { return nil }
            } else {
                if let initial { continuation.yield(initial) }
                if isOver { return nil }
                // Watched before anything moves: an entry to hang the watcher on.
                state.clock += 1
                state.entries[root] = Entry(
                    status: .readyForDownload, progress: initial ?? ContentProgress(verifiedBytes: 0, totalBytes: 0),
                    windowStart: .now, windowBytes: 0, touched: state.clock)
                Self.evict(&state)
            }
            state.nextWatcher += 1
            state.entries[root]?.watchers[state.nextWatcher] = continuation
            return state.nextWatcher
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.entries[root]?.watchers.removeValue(forKey: id) }
        }
        return stream
    }

    // MARK: - Writing

    /// Starts (or goes on) telling of a content of `totalBytes` with `status`; what was said of
    /// its progress stays.
    func begin(_ root: ContentRoot, totalBytes: UInt64, status: ContentTransferStatus) {
        update(root, totalBytes: totalBytes) { entry in entry.status = status }
    }

    /// A download starts being opened: downloading, its progress unknown (and not told) until
    /// the next change, which says what its files hold. So a watcher never sees a resumed
    /// download start again from 0.
    func beginOpening(_ root: ContentRoot, totalBytes: UInt64) {
        update(root, totalBytes: totalBytes, opening: true) { entry in entry.status = .downloading }
    }

    func setStatus(_ root: ContentRoot, _ status: ContentTransferStatus) {
        update(root, totalBytes: nil) { entry in entry.status = status }
    }

    /// Verified bytes (never fewer than said before).
    func advance(_ root: ContentRoot, verifiedBytes: UInt64) {
        update(root, totalBytes: nil) { entry in
            entry.progress.verifiedBytes = max(entry.progress.verifiedBytes, min(verifiedBytes, entry.progress.totalBytes))
        }
    }

    /// Chunk frame bytes that crossed the wire for the content.
    func addWire(_ root: ContentRoot, bytes: Int) {
        update(root, totalBytes: nil) { entry in
            entry.progress.wireBytes += UInt64(bytes)
            let elapsed = ContinuousClock.now - entry.windowStart
            if elapsed >= .seconds(1) {
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                entry.progress.bytesPerSecond = Double(entry.progress.wireBytes - entry.windowBytes) / seconds
                entry.windowStart = .now
                entry.windowBytes = entry.progress.wireBytes
            } else if entry.progress.bytesPerSecond == 0, elapsed >= .milliseconds(100) {
                let seconds = Double(elapsed.components.attoseconds) / 1e18
                entry.progress.bytesPerSecond = Double(entry.progress.wireBytes - entry.windowBytes) / seconds
            }
        }
    }

    /// The content is held whole: progress at exactly its size, watchers told and finished.
    func complete(_ root: ContentRoot, totalBytes: UInt64) {
        update(root, totalBytes: totalBytes, finish: true) { entry in
            entry.status = .complete
            entry.progress.verifiedBytes = entry.progress.totalBytes
            entry.progress.bytesPerSecond = 0
        }
    }

    func fail(_ root: ContentRoot, reason: String) {
        update(root, totalBytes: nil, finish: true) { entry in
            entry.status = .failed(reason: reason)
            entry.progress.bytesPerSecond = 0
        }
    }

    /// The service stopped: every watcher is finished (where the content stood is what it
    /// saw last), and so is any new one at once.
    func close() {
        let watchers = state.withLock { state -> [AsyncStream<ContentProgress>.Continuation] in
            state.isClosed = true
            var watchers: [AsyncStream<ContentProgress>.Continuation] = []
            for (root, entry) in state.entries where !entry.watchers.isEmpty {
                watchers += entry.watchers.values
                state.entries[root]?.watchers = [:]
            }
            return watchers
        }
        for watcher in watchers { watcher.finish() }
    }

    /// The content was removed (retention): what was said of it is forgotten (its status is
    /// read from the disk again), and its watchers' streams end.
    func removed(_ root: ContentRoot) {
        let watchers = state.withLock { $0.entries.removeValue(forKey: root).map { Array($0.watchers.values) } ?? [] }
        for watcher in watchers { watcher.finish() }
    }

    // MARK: - Uploads

    /// Content added here, and marked in `PendingUploads`: awaiting upload until a peer
    /// fetches a chunk of it. For content added before a restart and found not sent whole, the
    /// chunks sent before are not known: they count again as peers fetch them.
    func added(_ descriptor: ContentDescriptor) {
        update(descriptor.root, totalBytes: descriptor.byteCount) { entry in
            guard entry.upload == nil else { return }
            entry.upload = (TransferChunkSet(chunkCount: descriptor.chunkCount), descriptor)
            entry.status = .awaitingUpload
        }
    }

    /// A chunk of content added here was sent to a peer, in a frame of `wireBytes` bytes.
    func sent(_ root: ContentRoot, chunk: Int, wireBytes: Int) {
        let known = state.withLock { $0.entries[root]?.upload != nil }
        guard known else { return }
        // Whether this chunk was the last one not sent yet: what is sent again after is no news.
        var done = false
        update(root, totalBytes: nil) { entry in
            guard var upload = entry.upload, chunk >= 0, chunk < upload.sent.chunkCount else { return }
            if upload.sent.insert(chunk) {
                entry.progress.verifiedBytes += UInt64(upload.descriptor.byteCount(ofChunk: chunk) ?? 0)
                done = upload.sent.isFull
                if done { onSentWhole(root) }
            }
            entry.upload = upload
            entry.status = upload.sent.isFull ? .complete : .uploading
        }
        addWire(root, bytes: wireBytes)
        if done { update(root, totalBytes: nil, finish: true) { $0.progress.bytesPerSecond = 0 } }
    }

    // MARK: -

    private func update(
        _ root: ContentRoot, totalBytes: UInt64?, finish: Bool = false, opening: Bool = false, _ change: (inout Entry) -> Void
    ) {
        let (watchers, progress) = state.withLock { state -> ([AsyncStream<ContentProgress>.Continuation], ContentProgress?) in
            state.clock += 1
            var entry = state.entries[root] ?? Entry(
                status: .readyForDownload, progress: ContentProgress(verifiedBytes: 0, totalBytes: totalBytes ?? 0),
                windowStart: .now, windowBytes: 0, touched: state.clock)
            if let totalBytes { entry.progress.totalBytes = totalBytes }
            let before = entry.progress
            change(&entry)
            // Any change but the opening's ends the opening: it says what is held.
            let wasOpening = entry.isOpening
            entry.isOpening = opening
            entry.touched = state.clock
            let watchers = Array(entry.watchers.values)
            if finish { entry.watchers = [:] }
            let isNew = state.entries[root] == nil
            state.entries[root] = entry
            if isNew { Self.evict(&state) }
            if opening { return ([], nil) }
            return (watchers, entry.progress != before || finish || wasOpening ? entry.progress : nil)
        }
        if let progress { for watcher in watchers { watcher.yield(progress) } }
        if finish { for watcher in watchers { watcher.finish() } }
    }

    /// Forgets the least recently touched content that is over and unwatched, past the bound.
    private static func evict(_ state: inout State) {
        guard state.entries.count > maxEntries else { return }
        let idle = state.entries.filter { $0.value.isOver && $0.value.watchers.isEmpty }
        if let oldest = idle.min(by: { $0.value.touched < $1.value.touched }) { state.entries[oldest.key] = nil }
    }
}
