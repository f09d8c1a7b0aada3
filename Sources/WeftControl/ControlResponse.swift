import NIOCore
import WeftCrypto
import WeftModel

/// A response or event from the node (SPEC.md §15.5), carrying its request's id.
public enum ControlResponse: Hashable, Sendable {
    /// The request was carried out; nothing to report.
    case done
    case pong(UInt64)
    case status(NodeStatus)
    case peers([PeerRecord])
    case users([KnownUser])
    /// The replication counters, in the node's order.
    case statistics([ReplicationCounter])
    case conversation(ConversationRecord)
    /// A page: `total` conversations exist, these start at the requested offset.
    case conversations(total: UInt32, [ConversationRecord])
    /// The message just stored.
    case sent(OperationID)
    /// What became of each message of a SEND BATCH, in the request's order.
    case sentBatch([SendOutcome])
    /// A page: `total` messages exist, these start at the requested position.
    case messages(total: UInt32, [MessageRecord])
    /// The object waited for exists (for a merged conversation: the one it was merged into).
    case found(ControlObjectID)
    /// One event of a WATCH stream; the first is sent at once as `.watching`.
    case watching
    case event(ControlEvent)
    /// How far a DOWNLOAD is; the last one before DONE says the content is whole.
    case progress(DownloadProgress)
    case error(ControlFailure)

    /// One message of a SEND BATCH: stored (its identifier), or refused as SEND would refuse it.
    public enum SendOutcome: Hashable, Sendable {
        case sent(OperationID)
        case refused(ControlFailure)

        static let sentTag: UInt8 = 1
        static let refusedTag: UInt8 = 2
    }

    /// The response types of SPEC.md §15.5.
    public enum Kind: UInt8, CaseIterable, Sendable {
        case done = 0x80, pong = 0x81, status = 0x82, peers = 0x83, users = 0x84, statistics = 0x85
        case conversation = 0x90, conversations = 0x91, sent = 0x92, messages = 0x93, found = 0x94, sentBatch = 0x95
        case watching = 0xa0, event = 0xa1, progress = 0xa2
        case error = 0xff
    }

    public var kind: Kind {
        switch self {
        case .done: .done
        case .pong: .pong
        case .status: .status
        case .peers: .peers
        case .users: .users
        case .statistics: .statistics
        case .conversation: .conversation
        case .conversations: .conversations
        case .sent: .sent
        case .sentBatch: .sentBatch
        case .messages: .messages
        case .found: .found
        case .watching: .watching
        case .event: .event
        case .progress: .progress
        case .error: .error
        }
    }

    /// The body alone (no header).
    public var body: ByteBuffer {
        var body = ByteBuffer()
        switch self {
        case .done, .watching: break
        case .pong(let value): body.writeInteger(value)
        case .status(let status): status.write(into: &body)
        case .peers(let peers): body.writePage(peers) { $1.write(into: &$0) }
        case .users(let users): body.writePage(users) { $1.write(into: &$0) }
        case .statistics(let counters): body.writeList(counters) { $1.write(into: &$0) }
        case .conversation(let record): record.write(into: &body)
        case .conversations(let total, let records):
            body.writeInteger(total)
            body.writePage(records) { $1.write(into: &$0) }
        case .sent(let id): body.writeBytes(id.bytes)
        case .sentBatch(let outcomes):
            body.writeList(outcomes) { body, outcome in
                switch outcome {
                case .sent(let id):
                    body.writeInteger(SendOutcome.sentTag)
                    body.writeBytes(id.bytes)
                case .refused(let failure):
                    body.writeInteger(SendOutcome.refusedTag)
                    Self.write(failure, into: &body)
                }
            }
        case .messages(let total, let records):
            body.writeInteger(total)
            body.writePage(records) { $1.write(into: &$0) }
        case .found(let object): object.write(into: &body)
        case .event(let event): event.write(into: &body)
        case .progress(let progress): progress.write(into: &body)
        case .error(let failure): Self.write(failure, into: &body)
        }
        return body
    }

    private static func write(_ failure: ControlFailure, into body: inout ByteBuffer) {
        body.writeInteger(failure.code.rawValue)
        body.writeControlText(failure.message, limit: ControlConstants.maxErrorTextByteCount)
    }

    private static func readFailure(from body: inout ByteBuffer) throws(ControlFailure) -> ControlFailure {
        let code = ControlFailure.Code(rawValue: try body.readU16("error code"))
        return ControlFailure(code, try body.readControlText("error text", limit: ControlConstants.maxErrorTextByteCount))
    }

    public func frame(requestID: UInt32) -> ControlFrame {
        ControlFrame(type: kind.rawValue, requestID: requestID, body: body)
    }

    /// Reads a response frame; anything that does not parse throws `malformedRequest` (the
    /// client closes the connection: the node does not speak this protocol).
    public init(frame: ControlFrame) throws(ControlFailure) {
        guard let kind = Kind(rawValue: frame.type) else {
            throw .malformed("the response type \(frame.type) is not assigned")
        }
        var body = frame.body
        switch kind {
        case .progress: self = .progress(try DownloadProgress.read(from: &body))
        case .done: self = .done
        case .watching: self = .watching
        case .pong: self = .pong(try body.readU64("pong value"))
        case .status: self = .status(try NodeStatus.read(from: &body))
        case .peers: self = .peers(try body.readPage("peers", minimumItemBytes: 46) { (b: inout ByteBuffer) throws(ControlFailure) in try PeerRecord.read(from: &b) })
        case .users: self = .users(try body.readPage("users", minimumItemBytes: 35) { (b: inout ByteBuffer) throws(ControlFailure) in try KnownUser.read(from: &b) })
        case .statistics: self = .statistics(try body.readList("counters") { (b: inout ByteBuffer) throws(ControlFailure) in try ReplicationCounter.read(from: &b) })
        case .conversation: self = .conversation(try ConversationRecord.read(from: &body))
        case .conversations:
            let total = try body.readU32("total")
            self = .conversations(total: total, try body.readPage("conversations", minimumItemBytes: 80) { (b: inout ByteBuffer) throws(ControlFailure) in try ConversationRecord.read(from: &b) })
        case .sent: self = .sent(try body.readMessageID("message"))
        case .sentBatch:
            self = .sentBatch(try body.readList("outcomes") { (b: inout ByteBuffer) throws(ControlFailure) in
                switch try b.readU8("outcome") {
                case SendOutcome.sentTag: .sent(try b.readMessageID("message"))
                case SendOutcome.refusedTag: .refused(try Self.readFailure(from: &b))
                case let other: throw .malformed("the outcome \(other) is not assigned")
                }
            })
        case .messages:
            let total = try body.readU32("total")
            self = .messages(total: total, try body.readPage("messages", minimumItemBytes: 97) { (b: inout ByteBuffer) throws(ControlFailure) in try MessageRecord.read(from: &b) })
        case .found: self = .found(try ControlObjectID.read(from: &body))
        case .event: self = .event(try ControlEvent.read(from: &body))
        case .error: self = .error(try Self.readFailure(from: &body))
        }
        try body.expectEnd("the \(kind) response")
    }
}

/// How far a download is (SPEC.md §15.5, PROGRESS): verified bytes of the content here, its
/// size, chunk bytes received on the wire, the rate, and the transfer's status and reason.
public struct DownloadProgress: Hashable, Sendable {
    public var verifiedBytes: UInt64
    public var totalBytes: UInt64
    public var wireBytes: UInt64
    public var bytesPerSecond: UInt64
    public var status: ContentStatus
    public var reason: String

    public init(verifiedBytes: UInt64, totalBytes: UInt64, wireBytes: UInt64, bytesPerSecond: UInt64, status: ContentStatus, reason: String = "") {
        self.verifiedBytes = verifiedBytes
        self.totalBytes = totalBytes
        self.wireBytes = wireBytes
        self.bytesPerSecond = bytesPerSecond
        self.status = status
        self.reason = reason
    }

    /// From 0 to 1 (1 for empty content).
    public var fraction: Double { totalBytes == 0 ? 1 : min(1, Double(verifiedBytes) / Double(totalBytes)) }

    func write(into buffer: inout ByteBuffer) {
        buffer.writeInteger(verifiedBytes)
        buffer.writeInteger(totalBytes)
        buffer.writeInteger(wireBytes)
        buffer.writeInteger(bytesPerSecond)
        buffer.writeInteger(status.rawValue)
        buffer.writeControlText(reason, limit: ControlConstants.maxErrorTextByteCount)
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> DownloadProgress {
        let verified = try buffer.readU64("verified bytes")
        let total = try buffer.readU64("total bytes")
        guard verified <= total else { throw .malformed("\(verified) verified bytes of \(total)") }
        return DownloadProgress(
            verifiedBytes: verified, totalBytes: total, wireBytes: try buffer.readU64("wire bytes"),
            bytesPerSecond: try buffer.readU64("bytes per second"), status: try ContentStatus(reading: &buffer),
            reason: try buffer.readControlText("reason", limit: ControlConstants.maxErrorTextByteCount))
    }
}
