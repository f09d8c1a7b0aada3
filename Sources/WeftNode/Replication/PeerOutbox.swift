import NIOCore
import Synchronization
import WeftCrypto

/// What the node has yet to write on one connection: messages in order, with their byte
/// count, written by the connection's writer task one at a time (`MeshNode.send(_:on:)`
/// returns once the socket took the frame). The count tells the sync core when the peer stops
/// keeping up. Closed, with what it held dropped, when the connection ends.
final class PeerOutbox: Sendable {
    private struct State: ~Copyable {
        /// Short: about `highWatermark` bytes of messages of up to 1 MiB (so removing the first
        /// element's cost does not matter).
        var queue: [ByteBuffer] = []
        var bytes = 0
        var closed = false
        /// The writer, waiting for a message.
        var waitingWriter: CheckedContinuation<ByteBuffer?, Never>?
        /// Readers of the store waiting for room (`waitForRoom`).
        var waitingForRoom: [CheckedContinuation<Void, Never>] = []
        var reportedWritable = true
    }

    let connection: PeerConnection
    let highWatermark: Int
    let lowWatermark: Int
    private let state = Mutex(State())

    init(connection: PeerConnection, highWatermark: Int, lowWatermark: Int) {
        self.connection = connection
        self.highWatermark = highWatermark
        self.lowWatermark = lowWatermark
    }

    /// Queues a message. Returns false when this took the queue past the high mark for the
    /// first time (the core is then told the peer is not writable).
    func enqueue(_ message: ByteBuffer) -> Bool {
        let (writer, crossed) = state.withLock { state -> (CheckedContinuation<ByteBuffer?, Never>?, Bool) in
            guard !state.closed else { return (nil, false) }
            if let writer = state.waitingWriter {
                state.waitingWriter = nil
                state.bytes += message.readableBytes
                return (writer, false)  // handed over at once; counted until written
            }
            state.queue.append(message)
            state.bytes += message.readableBytes
            if state.reportedWritable && state.bytes > highWatermark {
                state.reportedWritable = false
                return (nil, true)
            }
            return (nil, false)
        }
        writer?.resume(returning: message)
        return !crossed
    }

    /// The next message to write, waiting for one; nil once closed.
    func next() async -> ByteBuffer? {
        await withCheckedContinuation { continuation in
            let message = state.withLock { state -> ByteBuffer?? in
                if !state.queue.isEmpty { return .some(state.queue.removeFirst()) }
                if state.closed { return .some(nil) }
                state.waitingWriter = continuation
                return nil
            }
            if let message { continuation.resume(returning: message) }
        }
    }

    /// A message of `byteCount` bytes was written. Returns true when this took the queue below
    /// the low mark after it had passed the high one (the peer is writable again).
    func written(_ byteCount: Int) -> Bool {
        let (waiters, recovered) = state.withLock { state -> ([CheckedContinuation<Void, Never>], Bool) in
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
        for waiter in waiters { waiter.resume() }
        return recovered
    }

    /// Waits until the queue is below the high mark (or closed): a reader of the store sends
    /// a peer its missing operations no faster than the peer takes them.
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

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Whether the queue is at or below its high mark: what can be left out (display names,
    /// §14.12) is not queued for a peer past it.
    var hasRoom: Bool { state.withLock { !$0.closed && $0.bytes <= highWatermark } }

    /// Drops what is queued and ends the writer (the connection ended).
    func close() {
        let (writer, waiters) = state.withLock { state in
            state.closed = true
            state.queue.removeAll()
            state.bytes = 0
            let writer = state.waitingWriter
            state.waitingWriter = nil
            let waiters = state.waitingForRoom
            state.waitingForRoom = []
            return (writer, waiters)
        }
        writer?.resume(returning: nil)
        for waiter in waiters { waiter.resume() }
    }
}
