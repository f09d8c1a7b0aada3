import NIOCore
import WeftCrypto
import WeftSync
import WeftWire

/// Decodes one Weft connection's two byte streams as SPEC.md §2–§8 and §14 lay them out, with
/// the node's own decoders (`Preamble`, `NodeInfo`, `TransportCodec`, `SyncStreamDecoder`,
/// `SyncMessage`): the preambles, the three handshake messages, every transport record, and,
/// with the connection's key log entry (§18), each frame and the sync message in each DATA
/// frame. Without the entry it still shows the preambles, the handshake's structure and every
/// record's length, and says why it cannot show more.
///
/// Sans-I/O: bytes of each direction in order (from TCP reassembly, a raw stream, a proxy),
/// records out. Not `Sendable`: one reader feeds it.
public final class ConnectionDecoder {
    public let number: Int
    /// The key log's entry for a connection, by the initiator's ephemeral key; asked again
    /// until found (a proxy's key log is still being written while the handshake passes).
    private let keys: ([UInt8]) -> KeyLogEntry?
    private let hasKeyLog: Bool
    private var entry: KeyLogEntry?
    /// The initiator's ephemeral key, once message 1 passed.
    private var ephemeral: [UInt8]?
    private var initiator: Direction
    private var responder: Direction
    private var sync = SyncDescription()

    /// - Parameters:
    ///   - number: the connection's number in the dump.
    ///   - keys: the key log's entries, by connection (the initiator's ephemeral key).
    ///   - fromStart: whether the streams are whole from their first byte (false for a capture
    ///     that starts in the middle of the connection: nothing can then be decoded).
    public convenience init(number: Int, keys: [[UInt8]: KeyLogEntry], fromStart: Bool = true) {
        self.init(number: number, hasKeyLog: !keys.isEmpty, fromStart: fromStart) { keys[$0] }
    }

    /// A decoder that asks `keys` for the connection's entry (see `awaitedEntry`).
    public init(number: Int, hasKeyLog: Bool, fromStart: Bool = true, keys: @escaping ([UInt8]) -> KeyLogEntry?) {
        self.number = number
        self.keys = keys
        self.hasKeyLog = hasKeyLog
        initiator = Direction(side: "initiator", phase: fromStart ? .preamble : .lost)
        responder = Direction(side: "responder", phase: fromStart ? .preamble : .lost)
    }

    private struct Direction {
        let side: String
        var phase: Phase
        var buffer = ByteBuffer()
        /// The stream offset of `buffer`'s reader index.
        var offset: UInt64 = 0
        var handshakeMessages = 0
        var codec: TransportCodec?
        let syncDecoder = SyncStreamDecoder()
        /// Whether the direction's "cannot decrypt" was said (once).
        var saidUndecrypted = false
    }

    private enum Phase {
        case preamble, handshake, transport
        /// Nothing more can be decoded in this direction (a gap, a record that did not open).
        case lost
    }

    /// Takes the next bytes of one direction (`fromInitiator`: sent by the initiator) at
    /// stream offset `offset`; the records they complete.
    public func feed(fromInitiator: Bool, offset: UInt64, _ bytes: some Collection<UInt8>, time: Int64) -> [DumpRecord] {
        var records: [DumpRecord] = []
        if fromInitiator {
            feed(&initiator, offset: offset, bytes, time: time, into: &records)
        } else {
            feed(&responder, offset: offset, bytes, time: time, into: &records)
        }
        return records
    }

    /// Bytes of a direction the input lacks: what follows cannot be decoded (records and the
    /// zstd stream need every byte before them).
    public func gap(fromInitiator: Bool, offset: UInt64, byteCount: UInt64, time: Int64) -> [DumpRecord] {
        let side = fromInitiator ? "initiator" : "responder"
        if fromInitiator { initiator.phase = .lost } else { responder.phase = .lost }
        return [record(time: time, side: side, offset: offset, length: Int(clamping: byteCount), kind: "problem", [
            DumpField("reason", .string("\(byteCount) bytes are missing from the capture here; the rest of this direction cannot be decoded"))
        ])]
    }

    /// Why nothing is decoded of a connection whose start the input lacks.
    public func midConnectionNote(time: Int64) -> DumpRecord {
        record(time: time, side: "", offset: 0, length: 0, kind: "note", [
            DumpField("reason", .string("the capture starts in the middle of this connection: without its preambles and handshake nothing in it can be decoded (its records' boundaries, its keys and its zstd streams need the connection from its first byte)"))
        ])
    }

    private func record(time: Int64, side: String, offset: UInt64, length: Int, kind: String, _ fields: [DumpField]) -> DumpRecord {
        DumpRecord(time: time, connection: number, from: side, offset: offset, length: length, kind: kind, fields: fields)
    }

    private func feed(_ direction: inout Direction, offset: UInt64, _ bytes: some Collection<UInt8>, time: Int64, into records: inout [DumpRecord]) {
        guard direction.phase != .lost else { return }
        if direction.buffer.readableBytes == 0 { direction.offset = offset }
        direction.buffer.writeBytes(bytes)
        while step(&direction, time: time, into: &records) {}
        direction.buffer.discardReadBytes()
    }

    /// Decodes one item if the buffer holds it whole; false when more bytes are needed.
    private func step(_ direction: inout Direction, time: Int64, into records: inout [DumpRecord]) -> Bool {
        let start = direction.offset
        let before = direction.buffer.readerIndex
        func consumed() -> Int { direction.buffer.readerIndex - before }
        func emit(_ kind: String, _ fields: [DumpField]) {
            records.append(record(time: time, side: direction.side, offset: start, length: consumed(), kind: kind, fields))
            direction.offset = start + UInt64(consumed())
        }
        switch direction.phase {
        case .lost:
            return false
        case .preamble:
            do {
                guard let preamble = try Preamble.read(from: &direction.buffer) else { return false }
                emit("preamble", [DumpField("version", .unsigned(UInt64(preamble.version)))])
                direction.phase = .handshake
            } catch {
                direction.buffer.moveReaderIndex(forwardBy: min(direction.buffer.readableBytes, WireConstants.preambleByteCount))
                emit("problem", [DumpField("reason", .string("not a Weft preamble: \(error)"))])
                direction.phase = .lost
            }
            return true
        case .handshake:
            guard let length = direction.buffer.getInteger(at: direction.buffer.readerIndex, as: UInt16.self),
                direction.buffer.readableBytes >= 2 + Int(length),
                let message = direction.buffer.getBytes(at: direction.buffer.readerIndex + 2, length: Int(length))
            else { return false }
            direction.buffer.moveReaderIndex(forwardBy: 2 + Int(length))
            direction.handshakeMessages += 1
            let number = direction.side == "initiator" ? (direction.handshakeMessages == 1 ? 1 : 3) : 2
            emit("handshake", handshakeFields(number, message))
            if number != 1 { startTransport(&direction) }
            return true
        case .transport:
            guard let length = direction.buffer.getInteger(at: direction.buffer.readerIndex, as: UInt32.self),
                direction.buffer.readableBytes >= WireConstants.recordLengthByteCount + Int(length)
            else { return false }
            if direction.codec == nil { attachCodec(&direction) }
            guard let codec = direction.codec else {
                direction.buffer.moveReaderIndex(forwardBy: WireConstants.recordLengthByteCount + Int(length))
                var fields = [DumpField("sealedLength", .integer(Int64(length)))]
                if !direction.saidUndecrypted {
                    direction.saidUndecrypted = true
                    fields.append(DumpField("note", .string(undecryptedReason)))
                }
                emit("record", fields)
                return true
            }
            do {
                guard let frame = try codec.open(from: &direction.buffer) else { return false }
                emit("frame", frameFields(frame, direction))
            } catch {
                direction.buffer.moveReaderIndex(forwardBy: min(direction.buffer.readableBytes, WireConstants.recordLengthByteCount + Int(length)))
                emit("problem", [DumpField("reason", .string("a record that does not open with the key log's key (\(error)); the rest of this direction cannot be decoded"))])
                direction.phase = .lost
            }
            return true
        }
    }

    /// The connection's name in the key log when message 1 has passed and its entry has not
    /// been found: a live reader may wait for the key log to hold it before feeding more.
    public var awaitedEntry: [UInt8]? { entry == nil ? ephemeral : nil }

    /// The entry, looked up again if it was not found before.
    private func currentEntry() -> KeyLogEntry? {
        if entry == nil, let ephemeral { entry = keys(ephemeral) }
        return entry
    }

    private var undecryptedReason: String {
        !hasKeyLog
            ? "no key log was given (set WEFT_KEYLOG on a node, pass the file with --keylog): records are shown by length only"
            : "the key log has no entry for this connection: records are shown by length only"
    }

    // MARK: - Handshake

    private func handshakeFields(_ number: Int, _ message: [UInt8]) -> [DumpField] {
        var fields = [DumpField("message", .integer(Int64(number)))]
        if number == 1, message.count >= 32 {
            ephemeral = Array(message.prefix(32))
            fields += [DumpField("ephemeral", .string(hex(message.prefix(32)))), DumpField("keyLogEntry", .bool(currentEntry() != nil))]
            return fields
        }
        if number == 2, message.count >= 32 { fields.append(DumpField("ephemeral", .string(hex(message.prefix(32))))) }
        guard let entry = currentEntry(), entry.secrets.fields.count == 5 else {
            fields.append(DumpField("sealed", .integer(Int64(max(0, message.count - (number == 2 ? 32 : 0))))))
            return fields
        }
        // Message 2: e (32) || sealed s (48) || sealed payload; message 3: sealed s || payload.
        let sealedStart = number == 2 ? 32 : 0
        let (staticField, payloadField) = number == 2 ? (entry.secrets.fields[1], entry.secrets.fields[2]) : (entry.secrets.fields[3], entry.secrets.fields[4])
        guard message.count >= sealedStart + 48 + 16 else {
            fields.append(DumpField("problem", .string("a handshake message too short for its fields")))
            return fields
        }
        do {
            let staticKey = try Self.open(message[sealedStart..<(sealedStart + 48)], with: staticField)
            let info = try NodeInfo(bytes: try Self.open(message[(sealedStart + 48)...], with: payloadField))
            fields += [
                DumpField("staticKey", .string(hex(staticKey))), DumpField("identity", .string("\(info.identity)")),
                DumpField("displayName", .string(info.displayName)), DumpField("protocolVersion", .unsigned(UInt64(info.protocolVersion))),
                DumpField("features", .unsigned(info.features)),
            ]
            if let port = info.listenPort { fields.append(DumpField("listenPort", .unsigned(UInt64(port)))) }
        } catch {
            fields.append(DumpField("problem", .string("the key log's secrets do not open this message: \(error)")))
        }
        return fields
    }

    private static func open(_ sealed: ArraySlice<UInt8>, with field: NoiseSessionSecrets.Field) throws -> [UInt8] {
        let cipher = CipherState(key: SecureBytes(copying: field.key))
        cipher.setNonce(field.nonce)
        return try cipher.decrypt(associatedData: field.associatedData, ciphertext: Array(sealed))
    }

    /// After its last handshake message a direction carries records, under its transport key.
    private func startTransport(_ direction: inout Direction) {
        direction.phase = .transport
        attachCodec(&direction)
    }

    /// The direction's transport codec, once the key log has the connection (none of its
    /// records may have been shown undecrypted: the codec's nonce starts at the first).
    private func attachCodec(_ direction: inout Direction) {
        guard !direction.saidUndecrypted, let entry = currentEntry() else { return }
        let key = direction.side == "initiator" ? entry.secrets.initiatorToResponder : entry.secrets.responderToInitiator
        let cipher = CipherState(key: SecureBytes(copying: key))
        direction.codec = TransportCodec(send: cipher, receive: cipher)
    }

    // MARK: - Frames

    /// The fields a dump shows of one plain sync message payload (§14.1), or why it does not
    /// decode: what a DATA frame's record carries after its `message` field.
    public static func describe(syncPayload: [UInt8]) -> [DumpField] {
        var description = SyncDescription()
        do {
            return description.fields(of: try SyncMessage(payload: syncPayload))
        } catch {
            return [DumpField("problem", .string("the sync message does not decode: \(error)"))]
        }
    }

    private func frameFields(_ frame: Frame, _ direction: Direction) -> [DumpField] {
        switch frame {
        case .ping(let value): return [DumpField("type", .string("PING")), DumpField("value", .unsigned(value))]
        case .pong(let value): return [DumpField("type", .string("PONG")), DumpField("value", .unsigned(value))]
        case .close(let code, let reason):
            return [DumpField("type", .string("CLOSE")), DumpField("code", .unsigned(UInt64(code.rawValue))), DumpField("reason", .string(reason))]
        case .error(let code, let reason):
            return [DumpField("type", .string("ERROR")), DumpField("code", .unsigned(UInt64(code.rawValue))), DumpField("reason", .string(reason))]
        case .rekey: return [DumpField("type", .string("REKEY"))]
        case .data(let payload):
            var fields = [DumpField("type", .string("DATA")), DumpField("payloadLength", .integer(Int64(payload.readableBytes)))]
            let compressed = payload.getInteger(at: payload.readerIndex, as: UInt8.self) == SyncMessageType.compressed.rawValue
            if compressed { fields.append(DumpField("compressed", .bool(true))) }
            do {
                let plain = try direction.syncDecoder.decode(payload)
                fields += sync.fields(of: try SyncMessage(payload: plain))
            } catch {
                fields.append(DumpField("problem", .string("the sync message does not decode: \(error)")))
            }
            return fields
        }
    }
}
