import NIOCore
import WeftBytes
import WeftCrypto

/// Each kind's body (SPEC.md §12.3), written and read in the same order. The reader refuses
/// anything non-canonical: unsorted or repeated list items, flags other than 0/1, empty lists
/// where one item is the least.
extension OperationBody {
    /// Writes the body (without its blob length) and returns its length.
    func write(to b: inout ByteBuffer) -> Int {
        var written = 0
        switch self {
        case .createConversation(let participants, let distinct, let generation, let metadata):
            written += b.writeOperationFlag(distinct)
            written += b.writeInteger(generation)
            written += Self.writeUsers(participants, to: &b)
            written += b.writeOperationListCount(metadata.count)
            for (key, value) in Operation.sortedByUTF8(metadata) {
                written += b.writeOperationText(key)
                written += b.writeOperationText(value)
            }
        case .addParticipants(let users), .removeParticipants(let users):
            written += Self.writeUsers(users, to: &b)
        case .setMetadata(let entries):
            written += b.writeOperationListCount(entries.count)
            for (key, value) in Operation.sortedByUTF8(entries) {
                written += b.writeOperationText(key)
                written += Self.writeOptional(value, to: &b)
            }
        case .postMessage(let parts, let options):
            written += b.writeOperationListCount(parts.count)
            let withContent = parts.contains { $0.content != nil }
            for part in parts {
                if withContent {
                    // Kind 10: each part says whether it is inline (0) or content (1).
                    written += b.writeInteger(part.content == nil ? UInt8(0) : UInt8(1))
                }
                written += b.writeOperationText(part.mimeType)
                if let content = part.content {
                    written += content.write(to: &b)
                } else {
                    written += b.writeOperationBlob(part.data)
                }
            }
            written += Self.writeOptional(options.notificationText, to: &b)
            written += Self.writeOptional(options.notificationSound, to: &b)
        case .delivered(let messages), .read(let messages):
            let sorted = Array(Set(messages)).sorted()
            written += b.writeOperationListCount(sorted.count)
            for message in sorted { written += b.writeBytes(message.bytes) }
        case .markAllRead:
            break
        case .deleteMessage(let message):
            written += b.writeBytes(message.bytes)
        }
        return written
    }

    /// Reads the body of an operation of `kind`; the caller checks nothing is left after it.
    init(kind: UInt8, reading b: inout ByteBuffer) throws(OperationError) {
        switch kind {
        case 1:
            let distinct = try b.readOperationFlag("distinct")
            let generation = try b.readOperationInteger(UInt32.self)
            let participants = try Self.readUsers(&b)
            let metadataCount = try b.readOperationListCount()
            var metadata: [String: String] = [:]
            var lastKey: String?
            for _ in 0..<metadataCount {
                let key = try Self.readMetadataKey(&b, after: lastKey)
                lastKey = key
                guard metadata[key] == nil else { throw Operation.equivalentKeys(key) }
                metadata[key] = try b.readOperationText()
            }
            self = .createConversation(participants: participants, distinct: distinct, generation: generation, metadata: metadata)
        case 2: self = .addParticipants(try Self.readUsers(&b))
        case 3: self = .removeParticipants(try Self.readUsers(&b))
        case 4:
            let count = try b.readOperationListCount()
            guard count > 0 else { throw .malformed("setMetadata sets no keys") }
            var entries: [String: String?] = [:]
            var lastKey: String?
            for _ in 0..<count {
                let key = try Self.readMetadataKey(&b, after: lastKey)
                lastKey = key
                guard entries[key] == nil else { throw Operation.equivalentKeys(key) }
                entries[key] = .some(try b.readOperationFlag("a metadata value flag") ? try b.readOperationText() : nil)
            }
            self = .setMetadata(entries)
        case 5, 10:
            let count = try b.readOperationListCount()
            guard count > 0 else { throw .malformed("a message has no parts") }
            var parts: [MessagePart] = []
            parts.reserveCapacity(count)
            for _ in 0..<count {
                let isContent: Bool
                if kind == 10 {
                    switch try b.readOperationInteger(UInt8.self) {
                    case 0: isContent = false
                    case 1: isContent = true
                    case let other: throw .malformed("part kind \(other) is neither inline (0) nor content (1)")
                    }
                } else {
                    isContent = false
                }
                let mimeType = try b.readOperationText()
                guard MessagePart.isValidMIMEType(mimeType) else {
                    throw .malformed("MIME type \"\(mimeType)\" is not of the form type/subtype")
                }
                if isContent {
                    do {
                        parts.append(MessagePart(mimeType: mimeType, content: try ContentDescriptor(reading: &b)))
                    } catch {
                        throw .malformed("a content part's descriptor: \(error)")
                    }
                } else {
                    let data = try b.readOperationBlob(limit: Operation.maxByteCount)
                    parts.append(MessagePart(mimeType: mimeType, data: data.readableBytesArray))
                }
            }
            // One encoding per message: kind 10 only where some part is content.
            guard (kind == 10) == parts.contains(where: { $0.content != nil }) else {
                throw .malformed(kind == 10 ? "a kind 10 message has no content part (it is kind 5)" : "a kind 5 message cannot hold content")
            }
            let text = try Self.readOptional(&b)
            let sound = try Self.readOptional(&b)
            self = .postMessage(parts: parts, options: MessageOptions(notificationText: text, notificationSound: sound))
        case 6, 7:
            let count = try b.readOperationListCount()
            guard count > 0 else { throw .malformed("a receipt names no messages") }
            var messages: [OperationID] = []
            messages.reserveCapacity(count)
            for _ in 0..<count { messages.append(try b.readOperationID()) }
            guard Operation.isStrictlySorted(messages) else { throw .malformed("receipt messages are not sorted and unique") }
            self = kind == 6 ? .delivered(messages) : .read(messages)
        case 8: self = .markAllRead
        case 9: self = .deleteMessage(try b.readOperationID())
        default:
            throw OperationError(.unknownKind, "operation kind \(kind) is unknown to this version (from a newer one?)")
        }
    }

    // MARK: - Shared fields

    private static func writeUsers(_ users: [UserID], to b: inout ByteBuffer) -> Int {
        let sorted = Array(Set(users)).sorted()
        var written = b.writeOperationListCount(sorted.count)
        for user in sorted { written += b.writeBytes(user.bytes) }
        return written
    }

    private static func readUsers(_ b: inout ByteBuffer) throws(OperationError) -> [UserID] {
        let count = try b.readOperationListCount()
        guard count > 0, count <= Operation.maxItems else { throw .malformed("a participant list holds \(count) users") }
        var users: [UserID] = []
        users.reserveCapacity(count)
        for _ in 0..<count { users.append(try b.readOperationUser()) }
        guard Operation.isStrictlySorted(users) else { throw .malformed("participants are not sorted and unique") }
        return users
    }

    /// Metadata keys come sorted by their UTF-8 bytes, each once (SPEC.md §12.3).
    private static func readMetadataKey(_ b: inout ByteBuffer, after lastKey: String?) throws(OperationError) -> String {
        let key = try b.readOperationText()
        guard lastKey.map({ Array($0.utf8).lexicographicallyPrecedes(Array(key.utf8)) }) ?? true else {
            throw .malformed("metadata keys are not sorted and unique")
        }
        return key
    }

    /// `present u8 [text]`.
    private static func writeOptional(_ text: String?, to b: inout ByteBuffer) -> Int {
        guard let text else { return b.writeOperationFlag(false) }
        return b.writeOperationFlag(true) + b.writeOperationText(text)
    }

    private static func readOptional(_ b: inout ByteBuffer) throws(OperationError) -> String? {
        try b.readOperationFlag("an optional field's flag") ? try b.readOperationText() : nil
    }
}
