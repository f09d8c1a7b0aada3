/// A TCP connection in a capture, by its two ends: the initiator is the end that sent the SYN
/// (or, for a connection whose start the capture lacks, the end of its first segment seen).
public struct TCPConnectionKey: Hashable, Sendable, CustomStringConvertible {
    public let initiator: Endpoint
    public let responder: Endpoint

    public var description: String { "\(initiator) → \(responder)" }
}

/// One direction of a TCP connection.
public enum TCPDirection: Hashable, Sendable {
    case fromInitiator, fromResponder
}

/// What reassembling a capture's TCP segments yields, in capture order.
public enum TCPStreamEvent: Sendable {
    /// A connection first seen (timestamps: nanoseconds since the Unix epoch). `sawStart`: its SYN was captured, so both streams are whole
    /// from their first byte; otherwise the capture starts in the middle of the connection.
    case opened(TCPConnectionKey, sawStart: Bool, timestamp: Int64)
    /// A direction's next bytes, in order, at `offset` from the first byte of it seen.
    case data(TCPConnectionKey, TCPDirection, offset: UInt64, bytes: ArraySlice<UInt8>, timestamp: Int64)
    /// Bytes the capture never had (lost by the capture, or beyond what was kept out of order):
    /// the stream goes on after them.
    case gap(TCPConnectionKey, TCPDirection, offset: UInt64, byteCount: UInt64)
    /// The direction ended: with FIN, once every byte before it arrived; or reset.
    case ended(TCPConnectionKey, TCPDirection, reset: Bool, timestamp: Int64)
}

/// Puts TCP segments back into the two byte streams of each connection: segments out of order
/// wait for those before them, retransmitted bytes are delivered once (the first copy wins),
/// sequence numbers wrap. Sans-I/O: segments in, events out.
///
/// What waits out of order is bounded per direction (`maxPendingByteCount`): past that, the
/// missing bytes are declared a gap and the stream goes on.
public struct TCPReassembler: Sendable {
    public var maxPendingByteCount: Int

    private var connections: [Pair: Connection] = [:]

    public init(maxPendingByteCount: Int = 16 << 20) {
        self.maxPendingByteCount = maxPendingByteCount
    }

    /// The connection's two ends, in no order.
    private struct Pair: Hashable {
        let low: Endpoint, high: Endpoint
        init(_ a: Endpoint, _ b: Endpoint) {
            let aFirst = a.address.bytes.lexicographicallyPrecedes(b.address.bytes) || (a.address == b.address && a.port <= b.port)
            (low, high) = aFirst ? (a, b) : (b, a)
        }
    }

    private struct Connection {
        var key: TCPConnectionKey
        var fromInitiator = Stream()
        var fromResponder = Stream()
    }

    private struct Stream {
        var isStarted = false
        /// The sequence number of the next byte expected, and its stream offset.
        var nextSequence: UInt32 = 0
        var offset: UInt64 = 0
        /// Bytes after a hole, by stream offset.
        var pending: [UInt64: ArraySlice<UInt8>] = [:]
        var pendingByteCount = 0
        /// The offset the FIN follows, once seen.
        var finOffset: UInt64?
        var isEnded = false
    }

    /// Takes one segment; the events it completes.
    public mutating func add(_ segment: TCPSegment, timestamp: Int64) -> [TCPStreamEvent] {
        var events: [TCPStreamEvent] = []
        let pair = Pair(segment.source, segment.destination)
        let isOpening = segment.flags.contains(.syn) && !segment.flags.contains(.ack)
        if var existing = connections[pair] {
            // A new SYN on ended ends reuses the addresses for a new connection.
            if isOpening, existing.fromInitiator.isEnded || existing.fromInitiator.nextSequence != segment.sequence &+ 1 {
                connections[pair] = nil
            } else {
                let direction: TCPDirection = segment.source == existing.key.initiator ? .fromInitiator : .fromResponder
                take(segment, direction: direction, in: &existing, timestamp: timestamp, into: &events)
                connections[pair] = existing
                return events
            }
        }
        let initiatorIsSource = !(segment.flags.contains(.syn) && segment.flags.contains(.ack))
        let key = initiatorIsSource
            ? TCPConnectionKey(initiator: segment.source, responder: segment.destination)
            : TCPConnectionKey(initiator: segment.destination, responder: segment.source)
        var connection = Connection(key: key)
        events.append(.opened(key, sawStart: segment.flags.contains(.syn), timestamp: timestamp))
        take(segment, direction: initiatorIsSource ? .fromInitiator : .fromResponder, in: &connection, timestamp: timestamp, into: &events)
        connections[pair] = connection
        return events
    }

    /// At the end of the capture: what still waits out of order, after a gap for what is
    /// missing before it.
    public mutating func finish() -> [TCPStreamEvent] {
        var events: [TCPStreamEvent] = []
        for (pair, var connection) in connections {
            for direction in [TCPDirection.fromInitiator, .fromResponder] {
                var stream = direction == .fromInitiator ? connection.fromInitiator : connection.fromResponder
                while let first = stream.pending.keys.min() {
                    events.append(.gap(connection.key, direction, offset: stream.offset, byteCount: first - stream.offset))
                    advance(&stream, to: first)
                    drain(&stream, key: connection.key, direction: direction, timestamp: 0, into: &events)
                }
                if direction == .fromInitiator { connection.fromInitiator = stream } else { connection.fromResponder = stream }
            }
            connections[pair] = connection
        }
        return events
    }

    private func take(
        _ segment: TCPSegment, direction: TCPDirection, in connection: inout Connection, timestamp: Int64, into events: inout [TCPStreamEvent]
    ) {
        var stream = direction == .fromInitiator ? connection.fromInitiator : connection.fromResponder
        defer { if direction == .fromInitiator { connection.fromInitiator = stream } else { connection.fromResponder = stream } }
        guard !stream.isEnded else { return }
        var sequence = segment.sequence
        if segment.flags.contains(.syn) {
            // The SYN takes one sequence number; the data starts after it.
            if !stream.isStarted {
                stream.isStarted = true
                stream.nextSequence = sequence &+ 1
            }
            sequence &+= 1
        } else if !stream.isStarted {
            stream.isStarted = true
            stream.nextSequence = sequence
        }
        let delta = Int64(Int32(bitPattern: sequence &- stream.nextSequence))
        let start = Int64(stream.offset) + delta
        if segment.flags.contains(.rst) {
            stream.isEnded = true
            events.append(.ended(connection.key, direction, reset: true, timestamp: timestamp))
            return
        }
        var payload = segment.payload
        if start >= 0 {
            let end = UInt64(start) + UInt64(payload.count)
            if segment.flags.contains(.fin) { stream.finOffset = end }
            var segmentStart = UInt64(start)
            if segmentStart < stream.offset {
                // Bytes delivered already (a retransmission): only what follows them is new.
                let known = Int(min(UInt64(payload.count), stream.offset - segmentStart))
                payload = payload.dropFirst(known)
                segmentStart += UInt64(known)
            }
            if !payload.isEmpty {
                if segmentStart == stream.offset {
                    events.append(.data(connection.key, direction, offset: stream.offset, bytes: payload, timestamp: timestamp))
                    advance(&stream, to: stream.offset + UInt64(payload.count))
                } else if stream.pending[segmentStart].map({ $0.count < payload.count }) ?? true {
                    stream.pendingByteCount += payload.count - (stream.pending[segmentStart]?.count ?? 0)
                    stream.pending[segmentStart] = payload
                }
            }
        }
        drain(&stream, key: connection.key, direction: direction, timestamp: timestamp, into: &events)
        // Too much waits behind a hole the capture will not fill: the hole is a gap.
        while stream.pendingByteCount > maxPendingByteCount, let first = stream.pending.keys.min() {
            events.append(.gap(connection.key, direction, offset: stream.offset, byteCount: first - stream.offset))
            advance(&stream, to: first)
            drain(&stream, key: connection.key, direction: direction, timestamp: timestamp, into: &events)
        }
        if let fin = stream.finOffset, stream.offset >= fin {
            stream.isEnded = true
            events.append(.ended(connection.key, direction, reset: false, timestamp: timestamp))
        }
    }

    /// Moves the expected position to `offset` (at or after the current one).
    private func advance(_ stream: inout Stream, to offset: UInt64) {
        stream.nextSequence &+= UInt32(truncatingIfNeeded: offset - stream.offset)
        stream.offset = offset
    }

    /// Delivers what waits and now follows on.
    private func drain(
        _ stream: inout Stream, key: TCPConnectionKey, direction: TCPDirection, timestamp: Int64, into events: inout [TCPStreamEvent]
    ) {
        while !stream.pending.isEmpty {
            // Any pending piece that starts at or before the current offset.
            guard let (start, bytes) = stream.pending.first(where: { $0.key <= stream.offset }) else { return }
            stream.pending[start] = nil
            stream.pendingByteCount -= bytes.count
            let end = start + UInt64(bytes.count)
            guard end > stream.offset else { continue }
            let fresh = bytes.dropFirst(Int(stream.offset - start))
            events.append(.data(key, direction, offset: stream.offset, bytes: fresh, timestamp: timestamp))
            advance(&stream, to: end)
        }
    }
}
