/// Consecutive slots of one author in one conversation log: (author, first) to (author, last),
/// a slot being an (author, sequence) pair (SPEC.md §13.1). How a STORED message names the
/// operations it acknowledges (§14.7): one range for a run of an author's operations instead of
/// an identifier each.
public struct SlotRange: Hashable, Sendable, CustomStringConvertible {
    public var conversation: ConversationID
    public var author: UserID
    /// The sequence numbers (an operation's sequence is at least 1 unless the merge rules
    /// refuse it, §13.1, and a refused operation is still held and acknowledged).
    public var sequences: ClosedRange<UInt64>

    public init(conversation: ConversationID, author: UserID, sequences: ClosedRange<UInt64>) {
        self.conversation = conversation
        self.author = author
        self.sequences = sequences
    }

    /// The fewest ranges that cover exactly the slots of `operations`: consecutive sequences of
    /// an author in a log make one range. Ascending by conversation, author and first sequence.
    public static func covering(_ operations: some Sequence<Operation>) -> [SlotRange] {
        let slots = operations.map { (conversation: $0.conversation, author: $0.author, sequence: $0.sequence) }.sorted {
            if $0.conversation != $1.conversation { return $0.conversation < $1.conversation }
            if $0.author != $1.author { return $0.author < $1.author }
            return $0.sequence < $1.sequence
        }
        var ranges: [SlotRange] = []
        for slot in slots {
            if let last = ranges.last, last.conversation == slot.conversation, last.author == slot.author,
                slot.sequence == 0 || slot.sequence - 1 <= last.sequences.upperBound
            {
                // Equal sequences (two operations of a slot) add nothing.
                ranges[ranges.count - 1].sequences = last.sequences.lowerBound...max(last.sequences.upperBound, slot.sequence)
            } else {
                ranges.append(SlotRange(conversation: slot.conversation, author: slot.author, sequences: slot.sequence...slot.sequence))
            }
        }
        return ranges
    }

    public var description: String {
        "\(conversation.hex):\(author):\(sequences.lowerBound)...\(sequences.upperBound)"
    }
}
