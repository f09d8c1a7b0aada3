import WeftCrypto

extension OperationBody {
    /// Most items any other list of the encoding carries: its count is a u16 (SPEC.md §12.1).
    public static let maxListCount = Int(UInt16.max)
    /// Longest text field in UTF-8 bytes: its length is a u16 (SPEC.md §12.1).
    public static let maxTextByteCount = Int(UInt16.max)
    /// Room a real operation needs beyond its body: the causes it names (a conversation rarely
    /// has more than a few heads).
    static let causesAllowance = Operation.maxWrittenCauses * OperationID.byteCount

    /// What about this body the encoding cannot carry, in words ("3 participant lists of ..."),
    /// or nil when an operation with it fits: every list within its count (participants within
    /// `Operation.maxItems`, the others within a u16), every text within a u16 length, and the
    /// whole operation, with room for its causes, within `Operation.maxByteCount`.
    ///
    /// Counts and lengths are checked before anything is encoded, since the encoder traps on
    /// them; callers that take bodies from users check here first and refuse with this sentence.
    public var limitViolation: String? {
        var texts: [String] = []
        switch self {
        case .createConversation(let participants, _, _, let metadata):
            if let violation = Self.participantViolation(participants) { return violation }
            if metadata.count > Self.maxListCount { return Self.countViolation(metadata.count, "metadata keys") }
            texts = Array(metadata.keys) + Array(metadata.values)
        case .addParticipants(let users), .removeParticipants(let users):
            if let violation = Self.participantViolation(users) { return violation }
        case .setMetadata(let entries):
            if entries.count > Self.maxListCount { return Self.countViolation(entries.count, "metadata keys") }
            texts = Array(entries.keys) + entries.values.compactMap { $0 }
        case .postMessage(let parts, let options):
            if parts.count > Self.maxListCount { return Self.countViolation(parts.count, "message parts") }
            texts = parts.map(\.mimeType) + [options.notificationText, options.notificationSound].compactMap { $0 }
        case .delivered(let messages), .read(let messages):
            let count = Set(messages).count
            if count > Self.maxListCount { return Self.countViolation(count, "messages in one receipt") }
        case .markAllRead, .deleteMessage:
            break
        }
        if let long = texts.first(where: { $0.utf8.count > Self.maxTextByteCount }) {
            return "a text field of \(long.utf8.count) bytes (the limit is 65,535)"
        }
        let probe = Operation(
            author: PublicIdentity(unvalidatedBytes: [UInt8](repeating: 0, count: PublicIdentity.byteCount)),
            conversation: ConversationID(bytes: [UInt8](repeating: 0, count: ConversationID.byteCount))!,
            sequence: 1, timestamp: HLCTimestamp(rawValue: 0), causes: [], body: self)
        let size = probe.encoded().count + Self.causesAllowance
        guard size <= Operation.maxByteCount else {
            return "an operation of about \(size) bytes (the limit is \(Operation.maxByteCount))"
        }
        return nil
    }

    private static func participantViolation(_ users: [UserID]) -> String? {
        let count = Set(users).count
        return count > Operation.maxItems ? "a participant list of \(count) users (the limit is \(Operation.maxItems))" : nil
    }

    private static func countViolation(_ count: Int, _ what: String) -> String {
        "\(count) \(what) (the limit is \(maxListCount))"
    }
}
