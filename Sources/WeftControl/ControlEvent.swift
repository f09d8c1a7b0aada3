import NIOCore
import WeftCrypto
import WeftModel

/// A conversation or a message, by identifier (SPEC.md §15.3, *object*).
public enum ControlObjectID: Hashable, Sendable {
    case conversation(ConversationID)
    case message(OperationID)

    func write(into buffer: inout ByteBuffer) {
        switch self {
        case .conversation(let id):
            buffer.writeInteger(UInt8(1))
            buffer.writeBytes(id.bytes)
        case .message(let id):
            buffer.writeInteger(UInt8(2))
            buffer.writeBytes(id.bytes)
        }
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> ControlObjectID {
        switch try buffer.readU8("object kind") {
        case 1: .conversation(try buffer.readConversation("conversation"))
        case 2: .message(try buffer.readMessageID("message"))
        case let other: throw .malformed("object kind \(other) is not assigned")
        }
    }
}

/// What changed: created, updated (with the property's name) or deleted.
public enum ChangeKind: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case create = 1, update, delete

    public var description: String {
        switch self {
        case .create: "create"
        case .update: "update"
        case .delete: "delete"
        }
    }
}

/// One event of a WATCH stream (SPEC.md §15.5, EVENT).
public enum ControlEvent: Hashable, Sendable {
    /// A conversation changed; `property` is the client API's name, empty unless an update.
    case conversation(ChangeKind, ConversationID, property: String)
    /// A message changed; `conversation` is nil for a deletion.
    case message(ChangeKind, OperationID, conversation: ConversationID?, property: String)
    /// A recipient's status of a message rose (sent, delivered, read) or it failed, with why.
    case delivery(message: OperationID, recipient: UserID, status: DeliveryStatus, reason: String)
    /// The watcher fell behind and this many batches of changes were lost: re-read the state.
    case missed(UInt32)
    /// A message the node now holds, whole (sender, parts, recipients): sent to a watcher that
    /// asked for messages, after the message's creation event.
    case newMessage(MessageRecord)

    func write(into buffer: inout ByteBuffer) {
        switch self {
        case .conversation(let kind, let id, let property):
            buffer.writeInteger(UInt8(1))
            buffer.writeInteger(kind.rawValue)
            buffer.writeBytes(id.bytes)
            buffer.writeControlText(property, limit: ControlConstants.maxShortTextByteCount)
        case .message(let kind, let id, let conversation, let property):
            buffer.writeInteger(UInt8(2))
            buffer.writeInteger(kind.rawValue)
            buffer.writeBytes(id.bytes)
            buffer.writeBool(conversation != nil)
            if let conversation { buffer.writeBytes(conversation.bytes) }
            buffer.writeControlText(property, limit: ControlConstants.maxShortTextByteCount)
        case .delivery(let message, let recipient, let status, let reason):
            buffer.writeInteger(UInt8(3))
            buffer.writeBytes(message.bytes)
            buffer.writeBytes(recipient.bytes)
            buffer.writeInteger(status.rawValue)
            buffer.writeControlText(reason, limit: ControlConstants.maxErrorTextByteCount)
        case .missed(let count):
            buffer.writeInteger(UInt8(4))
            buffer.writeInteger(count)
        case .newMessage(let record):
            buffer.writeInteger(UInt8(5))
            record.write(into: &buffer)
        }
    }

    static func read(from buffer: inout ByteBuffer) throws(ControlFailure) -> ControlEvent {
        switch try buffer.readU8("event kind") {
        case 1:
            let kind = try readKind(&buffer)
            return .conversation(kind, try buffer.readConversation("conversation"),
                property: try buffer.readControlText("property", limit: ControlConstants.maxShortTextByteCount))
        case 2:
            let kind = try readKind(&buffer)
            let id = try buffer.readMessageID("message")
            let conversation = try buffer.readBool("conversation present") ? try buffer.readConversation("conversation") : nil
            return .message(kind, id, conversation: conversation,
                property: try buffer.readControlText("property", limit: ControlConstants.maxShortTextByteCount))
        case 3:
            return .delivery(
                message: try buffer.readMessageID("message"), recipient: try buffer.readUser("recipient"),
                status: try DeliveryStatus(reading: &buffer, "status"),
                reason: try buffer.readControlText("reason", limit: ControlConstants.maxErrorTextByteCount))
        case 4:
            return .missed(try buffer.readU32("missed batches"))
        case 5:
            return .newMessage(try MessageRecord.read(from: &buffer))
        case let other:
            throw .malformed("event kind \(other) is not assigned")
        }
    }

    private static func readKind(_ buffer: inout ByteBuffer) throws(ControlFailure) -> ChangeKind {
        let raw = try buffer.readU8("change kind")
        guard let kind = ChangeKind(rawValue: raw) else { throw .malformed("change kind \(raw) is not assigned") }
        return kind
    }
}
