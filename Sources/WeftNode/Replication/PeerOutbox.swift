import NIOCore
import Synchronization
import WeftCrypto

/// What the node has yet to write on one connection, in two lanes: **sync** (replication's
/// messages, in order, through the connection's zstd stream) and **bulk** (content chunks,
/// written as they are). The connection's writer task takes one message at a time
/// (`MeshNode.send(_:on:)` returns once the socket took the frame), and always a sync message
/// first: operations, acknowledgements and receipts never wait behind chunks for more than
/// the one chunk being written.
///
/// Each lane has its own bound. The sync lane's byte count tells the sync core when the peer
/// stops keeping up; bulk senders wait for room (`waitForBulkRoom`) instead, so chunks go no
/// faster than the socket takes them and never count as sync backlog. Closed, with what it
/// held dropped, when the connection ends.
final class PeerOutbox: Sendable {
    /// Which lane a message is in.
    enum Lane: Sendable {
        case sync
        case bulk
    }

    private struct State: ~Copyable {
        /// Short: about `highWatermark` bytes of messages of up to 1 MiB (so removing the first
        /// element's cost does not matter).
        var queue: [ByteBuffer] = []
        var bytes = 0
        var bulkQueue: [ByteBuffer] = []
        var bulkBytes = 0
        var closed = false
        /// The writer, waiting for a message.
        var waitingWriter: CheckedContinuation<(ByteBuffer, Lane)?, Never>?
        /// Readers of the store waiting for room (`waitForRoom`).
        var waitingForRoom: [CheckedContinuation<Void, Never>] = []
        /// Senders of chunks waiting for room (`waitForBulkRoom`).
        var waitingForBulkRoom: [CheckedContinuation<Void, Never>] = []
        var reportedWritable = true
    }

    let connection: PeerConnection
    let highWatermark: Int
    let lowWatermark: Int
    /// Bytes of chunks queued (or being written) past which bulk senders wait.
    let bulkHighWatermark: Int
    private let state = Mutex(State())

    init(connection: PeerConnection, highWatermark: Int, lowWatermark: Int, bulkHighWatermark: Int = 2 << 20) {
        self.connection = connection
        self.highWatermark = highWatermark
        self.lowWatermark = lowWatermark
        self.bulkHighWatermark = bulkHighWatermark
    }

    /// Queues a sync message. Returns false when this took the queue past the high mark for
    /// the first time (the core is then told the peer is not writable).
    func enqueue(_ message: ByteBuffer) -> Bool {
        let (writer, crossed) = state.withLock { state -> (CheckedContinuation<(ByteBuffer, Lane)?, Never>?, Bool) in
            guard !state.closed else { return (nil, false) }
            state.bytes += message.readableBytes
            if let writer = state.waitingWriter {
                state.waitingWriter = nil
                return (writer, false)  // handed over at once; counted until written
            }
            state.queue.append(message)
            if state.reportedWritable && state.bytes > highWatermark {
                state.reportedWritable = false
                return (nil, true)
            }
            return (nil, false)
        }
        writer?.resume(returning: (message, .sync))
        return !crossed
    }

    /// Queues a content chunk message, whatever the bulk lane holds: callers wait for room
    /// first (`waitForBulkRoom`), so the lane stays near its bound.
    func enqueueBulk(_ message: ByteBuffer) {
        let writer = state.withLock { state -> CheckedContinuation<(ByteBuffer, Lane)?, Never>? in
            guard !state.closed else { return nil }
            state.bulkBytes += message.readableBytes
            if let writer = state.waitingWriter {
                state.waitingWriter = nil
                return writer
            }
            state.bulkQueue.append(message)
            return nil
        }
        writer?.resume(returning: (message, .bulk))
    }

    /// The next message to write and its lane, sync first, waiting for one; nil once closed.
    func next() async -> (ByteBuffer, Lane)? {
        await withCheckedContinuation { continuation in
            let message = state.withLock { state -> (ByteBuffer, Lane)?? in
                if !state.queue.isEmpty { return .some((state.queue.removeFirst(), .sync)) }
                if !state.bulkQueue.isEmpty { return .some((state.bulkQueue.removeFirst(), .bulk)) }
                if state.closed { return .some(nil) }
                state.waitingWriter = continuation
                return nil
            }
            if let message { continuation.resume(returning: message) }
        }
    }

    /// A message of `byteCount` bytes of `lane` was written. Returns true when this took the
    /// sync queue below the low mark after it had passed the high one (the peer is writable
    /// again).
    func written(_ byteCount: Int, lane: Lane = .sync) -> Bool {
        let (waiters, recovered) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool) in
            switch lane {
            case .bulk:
                state.bulkBytes -= byteCount
                guard state.bulkBytes <= bulkHighWatermark else { return ([], false) }
                let waiters = state.waitingForBulkRoom
                state.waitingForBulkRoom = []
                return (waiters, false)
            case .sync:
                state.bytes -= byteCount
                guard state.bytes <= lowWatermark else { return ([], false) }
                let waiters = state.waitingForRoom
                state.waitingForRoom = []
                if !state.reportedWritable {
                    state.reportedWritable = true
                    return (waiters, true)
                }
                return (waiters, false)
            }
        }
        for waiter in waiters { waiter.resume() }
        return recovered
    }

    /// Waits until the sync queue is below the high mark (or closed): a reader of the store
    /// sends a peer its missing operations no faster than the peer takes them.
    func waitForRoom() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.closed || state.bytes <= highWatermark { return true }
                state.waitingForRoom.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Waits until the bulk lane is at or below its bound (or closed).
    func waitForBulkRoom() async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if state.closed || state.bulkBytes <= bulkHighWatermark { return true }
                state.waitingForBulkRoom.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Whether the sync queue is at or below its high mark: what can be left out (display
    /// names, §14.12) is not queued for a peer past it.
    var hasRoom: Bool { state.withLock { !$0.closed && $0.bytes <= highWatermark } }

    /// Drops what is queued and ends the writer (the connection ended).
    func close() {
        let (writer, waiters) = state.withLock { state in
            state.closed = true
            state.queue.removeAll()
            state.bytes = 0
            state.bulkQueue.removeAll()
            state.bulkBytes = 0
            let writer = state.waitingWriter
            state.waitingWriter = nil
            let waiters = state.waitingForRoom + state.waitingForBulkRoom
            state.waitingForRoom = []
            state.waitingForBulkRoom = []
            return (writer, waiters)
        }
        writer?.resume(returning: nil)
        for waiter in waiters { waiter.resume() }
    }
}
