import NIOCore
import WeftCrypto
import WeftModel

/// A request from a client to the node (SPEC.md §15.4). One enum, one switch to read and one
/// to write, in the order of the table.
public enum ControlRequest: Hashable, Sendable {
    case ping(UInt64)
    case status
    case peers
    case users
    case createConversation(CreateConversation)
    case addParticipants([UserID], to: ConversationID)
    case removeParticipants([UserID], from: ConversationID)
    case leave(ConversationID)
    /// A page of conversations from `offset` (in creation order).
    case conversations(offset: UInt32)
    case conversation(ConversationID)
    case send([Part], in: ConversationID)
    /// Up to `ControlConstants.maxBatchCount` messages, each sent as SEND would send it.
    case sendBatch([Outgoing])
    /// A message whose parts are data or files the node reads itself (a client on the same
    /// machine): a large file becomes rich content without passing through the socket.
    case sendFiles([FilePart], in: ConversationID)
    /// Fetch part `part` (from 0) of a message, and copy it to `path` (absolute; empty: keep it
    /// in the node only); answered by PROGRESS frames, then DONE once it is whole.
    case download(OperationID, part: UInt16, path: String)
    /// A page of the conversation's messages from position `offset`.
    case messages(ConversationID, offset: UInt32)
    case markRead(OperationID)
    case markAllRead(ConversationID)
    case wait(ControlObjectID, timeoutMilliseconds: UInt32)
    /// Stream changes and delivery events; with `messages`, also each new message's record
    /// (its sender and text), as a receiving client shows it.
    case watch(messages: Bool)
    /// The replication counters (for benchmarks and tests: duplicates received, ...).
    case statistics
    /// Dial `host:port` and keep dialing it (a link added while running).
    case connect(address: String)
    /// Stop dialing `host:port` (CONNECT's, or a remembered one) and close the connection with
    /// the peer last found there.
    case disconnect(address: String)
    /// Close the link to a peer and refuse it until HEAL (a partition in a test mesh).
    case cut(UserID)
    /// Accept a cut peer again and redial its address at once.
    case heal(UserID)

    /// A new conversation's participants (the local user is implicit) and options.
    public struct CreateConversation: Hashable, Sendable {
        public var participants: [UserID]
        public var distinct: Bool
        /// Replicate at once instead of with the first message.
        public var announce: Bool
        public var metadata: [String: String]

        public init(participants: [UserID], distinct: Bool = true, announce: Bool = false, metadata: [String: String] = [:]) {
            self.participants = participants
            self.distinct = distinct
            self.announce = announce
            self.metadata = metadata
        }
    }

    /// A message part: its data travels in the request.
    public struct Part: Hashable, Sendable {
        public var mimeType: String
        public var data: [UInt8]

        public init(mimeType: String, data: [UInt8]) {
            self.mimeType = mimeType
            self.data = data
        }
    }

    /// A part of SEND FILES: data in the request, or the path of a file the node reads.
    public struct FilePart: Hashable, Sendable {
        public enum Source: Hashable, Sendable {
            case data([UInt8])
            /// An absolute path on the node's machine.
            case file(String)
        }

        public var mimeType: String
        public var source: Source

        public init(mimeType: String, source: Source) {
            self.mimeType = mimeType
            self.source = source
        }
    }

    /// One message of a SEND BATCH: its conversation and parts.
    public struct Outgoing: Hashable, Sendable {
        public var conversation: ConversationID
        public var parts: [Part]

        public init(_ parts: [Part], in conversation: ConversationID) {
            self.conversation = conversation
            self.parts = parts
        }
    }

    /// The request types of SPEC.md §15.4.
    public enum Kind: UInt8, CaseIterable, Sendable {
        case ping = 0x01, status = 0x02, peers = 0x03, users = 0x04, statistics = 0x05
        case createConversation = 0x10, addParticipants = 0x11, removeParticipants = 0x12, leave = 0x13
        case conversations = 0x14, conversation = 0x15
        case send = 0x20, messages = 0x21, markRead = 0x22, markAllRead = 0x23, sendBatch = 0x24, sendFiles = 0x25
        case wait = 0x30, watch = 0x31, download = 0x32
        case connect = 0x40, cut = 0x41, heal = 0x42, disconnect = 0x43
    }

    public var kind: Kind {
        switch self {
        case .ping: .ping
        case .status: .status
        case .peers: .peers
        case .users: .users
        case .createConversation: .createConversation
        case .addParticipants: .addParticipants
        case .removeParticipants: .removeParticipants
        case .leave: .leave
        case .conversations: .conversations
        case .conversation: .conversation
        case .send: .send
        case .sendBatch: .sendBatch
        case .sendFiles: .sendFiles
        case .messages: .messages
        case .markRead: .markRead
        case .markAllRead: .markAllRead
        case .wait: .wait
        case .watch: .watch
        case .download: .download
        case .statistics: .statistics
        case .connect: .connect
        case .disconnect: .disconnect
        case .cut: .cut
        case .heal: .heal
        }
    }

    static let distinctFlag: UInt8 = 1
    static let announceFlag: UInt8 = 2
    /// WATCH's flag: also stream new messages' records.
    static let messagesFlag: UInt8 = 1

    // MARK: - Writing

    /// The request as a frame with `requestID`.
    public func frame(requestID: UInt32) -> ControlFrame {
        var body = ByteBuffer()
        switch self {
        case .ping(let value):
            body.writeInteger(value)
        case .status, .peers, .users, .statistics, .watch(messages: false):
            break
        case .watch(messages: true):
            body.writeInteger(Self.messagesFlag)
        case .createConversation(let create):
            body.writeInteger((create.distinct ? Self.distinctFlag : 0) | (create.announce ? Self.announceFlag : 0))
            body.writeList(create.participants) { $0.writeBytes($1.bytes) }
            body.writeList(create.metadata.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }) {
                $0.writeControlText($1.key)
                $0.writeControlText($1.value)
            }
        case .addParticipants(let users, let conversation), .removeParticipants(let users, let conversation):
            body.writeBytes(conversation.bytes)
            body.writeList(users) { $0.writeBytes($1.bytes) }
        case .leave(let conversation), .conversation(let conversation), .markAllRead(let conversation):
            body.writeBytes(conversation.bytes)
        case .conversations(let offset):
            body.writeInteger(offset)
        case .send(let parts, let conversation):
            Self.write(parts, in: conversation, into: &body)
        case .sendBatch(let messages):
            body.writeList(messages) { Self.write($1.parts, in: $1.conversation, into: &$0) }
        case .sendFiles(let parts, let conversation):
            body.writeBytes(conversation.bytes)
            body.writeList(parts) {
                $0.writeControlText($1.mimeType)
                switch $1.source {
                case .data(let data):
                    $0.writeInteger(UInt8(0))
                    $0.writeBlob(data)
                case .file(let path):
                    $0.writeInteger(UInt8(1))
                    $0.writeControlText(path, limit: ControlConstants.maxPathByteCount)
                }
            }
        case .messages(let conversation, let offset):
            body.writeBytes(conversation.bytes)
            body.writeInteger(offset)
        case .markRead(let message):
            body.writeBytes(message.bytes)
        case .download(let message, let part, let path):
            body.writeBytes(message.bytes)
            body.writeInteger(part)
            body.writeControlText(path, limit: ControlConstants.maxPathByteCount)
        case .wait(let object, let timeout):
            object.write(into: &body)
            body.writeInteger(timeout)
        case .connect(let address), .disconnect(let address):
            body.writeControlText(address, limit: ControlConstants.maxShortTextByteCount)
        case .cut(let peer), .heal(let peer):
            body.writeBytes(peer.bytes)
        }
        return ControlFrame(type: kind.rawValue, requestID: requestID, body: body)
    }

    private static func write(_ parts: [Part], in conversation: ConversationID, into body: inout ByteBuffer) {
        body.writeBytes(conversation.bytes)
        body.writeList(parts) {
            $0.writeControlText($1.mimeType)
            $0.writeBlob($1.data)
        }
    }

    private static func readMessage(from body: inout ByteBuffer) throws(ControlFailure) -> Outgoing {
        let conversation = try body.readConversation("conversation")
        let parts = try body.readList("parts") { (b: inout ByteBuffer) throws(ControlFailure) in
            Part(mimeType: try b.readControlText("MIME type"), data: try b.readBlob("part data", limit: ControlConstants.maxFrameByteCount))
        }
        return Outgoing(parts, in: conversation)
    }

    /// Bytes of a frame for this request (its length included): what a client checks against
    /// `ControlConstants.maxFrameByteCount` before sending a large message.
    public var encodedByteCount: Int { ControlConstants.lengthByteCount + ControlConstants.headerByteCount + frame(requestID: 0).body.readableBytes }

    // MARK: - Reading

    /// Reads a request frame; throws `unknownRequestType` or `malformedRequest`.
    public init(frame: ControlFrame) throws(ControlFailure) {
        guard let kind = Kind(rawValue: frame.type) else {
            throw ControlFailure(.unknownRequestType, "The control request type \(frame.type) is not assigned.")
        }
        var body = frame.body
        switch kind {
        case .ping: self = .ping(try body.readU64("ping value"))
        case .status: self = .status
        case .peers: self = .peers
        case .users: self = .users
        case .watch:
            // Empty, as version 1 first defined it, or a flags byte.
            let flags = body.readableBytes == 0 ? 0 : try body.readFlags("watch flags", allowed: Self.messagesFlag)
            self = .watch(messages: flags & Self.messagesFlag != 0)
        case .statistics: self = .statistics
        case .createConversation:
            let flags = try body.readFlags("conversation flags", allowed: Self.distinctFlag | Self.announceFlag)
            let participants = try body.readList("participants") { (b: inout ByteBuffer) throws(ControlFailure) in try b.readUser("participant") }
            let entries = try body.readList("metadata") { (b: inout ByteBuffer) throws(ControlFailure) in
                (try b.readControlText("metadata key"), try b.readControlText("metadata value"))
            }
            var metadata: [String: String] = [:]
            for (key, value) in entries {
                guard metadata.updateValue(value, forKey: key) == nil else { throw .malformed("the metadata key \"\(key)\" appears twice") }
            }
            self = .createConversation(CreateConversation(
                participants: participants, distinct: flags & Self.distinctFlag != 0, announce: flags & Self.announceFlag != 0,
                metadata: metadata))
        case .addParticipants, .removeParticipants:
            let conversation = try body.readConversation("conversation")
            let users = try body.readList("participants") { (b: inout ByteBuffer) throws(ControlFailure) in try b.readUser("participant") }
            guard !users.isEmpty else { throw .malformed("the participant list is empty") }
            self = kind == .addParticipants ? .addParticipants(users, to: conversation) : .removeParticipants(users, from: conversation)
        case .leave: self = .leave(try body.readConversation("conversation"))
        case .conversation: self = .conversation(try body.readConversation("conversation"))
        case .markAllRead: self = .markAllRead(try body.readConversation("conversation"))
        case .conversations: self = .conversations(offset: try body.readU32("offset"))
        case .send:
            let message = try Self.readMessage(from: &body)
            self = .send(message.parts, in: message.conversation)
        case .sendBatch:
            let messages = try body.readList("messages") { (b: inout ByteBuffer) throws(ControlFailure) in try Self.readMessage(from: &b) }
            guard (1...ControlConstants.maxBatchCount).contains(messages.count) else {
                throw .malformed("a SEND BATCH holds 1 to \(ControlConstants.maxBatchCount) messages, not \(messages.count)")
            }
            self = .sendBatch(messages)
        case .sendFiles:
            let conversation = try body.readConversation("conversation")
            let parts = try body.readList("parts") { (b: inout ByteBuffer) throws(ControlFailure) -> FilePart in
                let mimeType = try b.readControlText("MIME type")
                switch try b.readU8("part source") {
                case 0: return FilePart(mimeType: mimeType, source: .data(try b.readBlob("part data", limit: ControlConstants.maxFrameByteCount)))
                case 1:
                    let path = try b.readControlText("file path", limit: ControlConstants.maxPathByteCount)
                    guard path.hasPrefix("/") else { throw .malformed("the file path \"\(path)\" is not absolute") }
                    return FilePart(mimeType: mimeType, source: .file(path))
                case let other: throw .malformed("part source \(other) is neither data (0) nor a file (1)")
                }
            }
            guard !parts.isEmpty else { throw .malformed("a SEND FILES has no parts") }
            self = .sendFiles(parts, in: conversation)
        case .messages:
            let conversation = try body.readConversation("conversation")
            self = .messages(conversation, offset: try body.readU32("offset"))
        case .markRead: self = .markRead(try body.readMessageID("message"))
        case .download:
            let message = try body.readMessageID("message")
            let part = try body.readU16("part")
            let path = try body.readControlText("path", limit: ControlConstants.maxPathByteCount)
            guard path.isEmpty || path.hasPrefix("/") else { throw .malformed("the path \"\(path)\" is not absolute") }
            self = .download(message, part: part, path: path)
        case .wait:
            let object = try ControlObjectID.read(from: &body)
            self = .wait(object, timeoutMilliseconds: try body.readU32("timeout"))
        case .connect: self = .connect(address: try body.readControlText("address", limit: ControlConstants.maxShortTextByteCount))
        case .disconnect: self = .disconnect(address: try body.readControlText("address", limit: ControlConstants.maxShortTextByteCount))
        case .cut: self = .cut(try body.readUser("peer"))
        case .heal: self = .heal(try body.readUser("peer"))
        }
        try body.expectEnd("the \(kind) request")
    }
}
