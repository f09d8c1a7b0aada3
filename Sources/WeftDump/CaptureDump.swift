import WeftCapture
import WeftWire

/// Which records a dump shows. Empty sets show everything.
public struct DumpFilter: Sendable {
    /// TCP ports whose connections are decoded; empty: every connection that starts with a
    /// Weft preamble (a connection whose start the capture lacks is then not recognised).
    public var ports: Set<UInt16> = []
    /// Connection numbers to show.
    public var connections: Set<Int> = []
    /// Frame types (PING, DATA, …) and sync message types (OPERATIONS, CHUNK, …) to show;
    /// records of other kinds (preambles, handshakes, problems) are shown with any.
    public var types: Set<String> = []
    /// Conversations (hex) whose sync messages are shown: those that name one of them.
    public var conversations: Set<String> = []

    public init() {}

    /// Whether the record passes.
    public func admits(_ record: DumpRecord) -> Bool {
        if !connections.isEmpty, !connections.contains(record.connection) { return false }
        if !types.isEmpty, record.kind == "frame" {
            let named = [record["type"], record["message"]].compactMap { value -> String? in
                if case .string(let text)? = value { text } else { nil }
            }
            if !named.contains(where: { types.contains($0.uppercased()) }) { return false }
        }
        if !conversations.isEmpty, record.kind == "frame" {
            return Self.mentions(.object(record.fields), conversations)
        }
        return true
    }

    /// Whether any "conversation" field inside `value` is one of `conversations`.
    private static func mentions(_ value: DumpValue, _ conversations: Set<String>) -> Bool {
        switch value {
        case .object(let fields):
            fields.contains { field in
                if field.name == "conversation", case .string(let id) = field.value, conversations.contains(id) { return true }
                if field.name == "conversations", case .list(let ids) = field.value {
                    return ids.contains { if case .string(let id) = $0 { conversations.contains(id) } else { false } }
                }
                return mentions(field.value, conversations)
            }
        case .list(let values): values.contains { mentions($0, conversations) }
        default: false
        }
    }
}

/// `weft dump` over a capture file: bytes of a pcap or pcapng file in, records out, in capture
/// order. Each TCP connection (numbered from 1 as first seen) goes through TCP reassembly and a
/// `ConnectionDecoder`; mDNS datagrams (UDP 5353) through `MDNSDescription`; damage in the
/// file is a "problem" record with its byte offset, and the reading goes on where it can.
///
/// Sans-I/O: the command feeds it the file in pieces. Not `Sendable`: one reader feeds it.
public final class CaptureDump {
    public let filter: DumpFilter
    private let keys: [[UInt8]: KeyLogEntry]
    private var file = CaptureFileDecoder()
    private var reassembler = TCPReassembler()
    private var connections: [TCPConnectionKey: Tracked] = [:]
    private var numbered = 0
    private var time: Int64 = 0

    /// A connection: decoded, or not yet known to be Weft's (its first bytes wait), or not Weft's.
    private enum Tracked {
        case undecided(fromStart: Bool, waiting: [(fromInitiator: Bool, offset: UInt64, bytes: [UInt8])])
        case decoding(ConnectionDecoder)
        case ignored
    }

    public init(keys: [[UInt8]: KeyLogEntry], filter: DumpFilter = DumpFilter()) {
        self.keys = keys
        self.filter = filter
    }

    /// Takes the next bytes of the capture file; the records they complete.
    public func feed(_ bytes: some Sequence<UInt8>) -> [DumpRecord] {
        file.feed(bytes)
        var records: [DumpRecord] = []
        while !file.isEnded {
            do {
                guard let packet = try file.next() else { break }
                time = packet.timestamp
                records += take(packet)
            } catch {
                records.append(problem(error))
            }
        }
        return records.filter(filter.admits)
    }

    /// At the end of the file: what waited out of order, and a cut-short file's problem.
    public func finish() -> [DumpRecord] {
        var records: [DumpRecord] = []
        for event in reassembler.finish() { records += take(event) }
        do { try file.finish() } catch { records.append(problem(error)) }
        return records.filter(filter.admits)
    }

    private func problem(_ error: CaptureError) -> DumpRecord {
        DumpRecord(
            time: time, connection: 0, from: "", offset: UInt64(error.offset), length: 0, kind: "problem",
            fields: [DumpField("reason", .string("the capture file is damaged at byte \(error.offset): \(error.reason)"))])
    }

    private func take(_ packet: CapturedPacket) -> [DumpRecord] {
        let decoded: DecodedPacket
        do { decoded = try PacketDecoder.decode(packet) } catch { return [problem(error)] }
        switch decoded {
        case .tcp(let segment):
            return reassembler.add(segment, timestamp: packet.timestamp).flatMap(take)
        case .udp(let datagram) where datagram.source.port == 5353 || datagram.destination.port == 5353:
            return [MDNSDescription.record(datagram, time: packet.timestamp, fileOffset: packet.fileOffset)]
        case .udp, .other:
            return []
        }
    }

    private func take(_ event: TCPStreamEvent) -> [DumpRecord] {
        switch event {
        case .opened(let key, let sawStart, let time):
            connections[key] = .undecided(fromStart: sawStart, waiting: [])
            if !filter.ports.isEmpty, !filter.ports.contains(key.responder.port), !filter.ports.contains(key.initiator.port) {
                connections[key] = .ignored
                return []
            }
            if !sawStart, !filter.ports.isEmpty {
                // Told to look at it, but its start is missing: say so, once.
                let decoder = start(key, fromStart: false)
                return [opening(key, decoder, time: time), decoder.midConnectionNote(time: time)]
            }
            return []
        case .data(let key, let direction, let offset, let bytes, let time):
            return data(key, fromInitiator: direction == .fromInitiator, offset: offset, bytes, time: time)
        case .gap(let key, let direction, let offset, let count):
            guard case .decoding(let decoder)? = connections[key] else { return [] }
            return decoder.gap(fromInitiator: direction == .fromInitiator, offset: offset, byteCount: count, time: time)
        case .ended:
            return []
        }
    }

    private func data(_ key: TCPConnectionKey, fromInitiator: Bool, offset: UInt64, _ bytes: ArraySlice<UInt8>, time: Int64) -> [DumpRecord] {
        switch connections[key] {
        case .decoding(let decoder)?:
            return decoder.feed(fromInitiator: fromInitiator, offset: offset, bytes, time: time)
        case .undecided(let fromStart, var waiting)?:
            // Kept until the connection is known to be Weft's (a slice of the file's buffer
            // would keep that whole buffer).
            waiting.append((fromInitiator, offset, Array(bytes)))
            // Weft's if the initiator's first bytes are the magic, or its port was asked for.
            let first = waiting.filter(\.fromInitiator).flatMap(\.bytes)
            let magic = WireConstants.magic
            if !filter.ports.isEmpty || (first.count >= magic.count && Array(first.prefix(magic.count)) == magic) {
                let decoder = start(key, fromStart: fromStart)
                var records = [opening(key, decoder, time: time)]
                for piece in waiting {
                    records += decoder.feed(fromInitiator: piece.fromInitiator, offset: piece.offset, piece.bytes, time: time)
                }
                return records
            }
            if first.count >= magic.count || waiting.reduce(0, { $0 + $1.bytes.count }) > 4_096 {
                connections[key] = .ignored
            } else {
                connections[key] = .undecided(fromStart: fromStart, waiting: waiting)
            }
            return []
        case .ignored?, nil:
            return []
        }
    }

    private func start(_ key: TCPConnectionKey, fromStart: Bool) -> ConnectionDecoder {
        numbered += 1
        let decoder = ConnectionDecoder(number: numbered, keys: keys, fromStart: fromStart)
        connections[key] = .decoding(decoder)
        return decoder
    }

    private func opening(_ key: TCPConnectionKey, _ decoder: ConnectionDecoder, time: Int64) -> DumpRecord {
        DumpRecord(
            time: time, connection: decoder.number, from: "", offset: 0, length: 0, kind: "connection",
            fields: [DumpField("initiator", .string("\(key.initiator)")), DumpField("responder", .string("\(key.responder)"))])
    }
}
