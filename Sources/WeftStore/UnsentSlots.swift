import WeftModel

/// The local user's messages not sent yet (waiting or failed in the outbox), by the slot their
/// operation holds in its log: what maps a peer's STORED, which names slots (SPEC.md §14.7),
/// back to messages without reading the outbox. Reading it there cost a scan of every unsent
/// entry per acknowledgement, and a sender under load has thousands in flight.
///
/// The store loads it when it opens and keeps it as writes fill and empty the outbox. It may
/// still name a message that is sent (a commit that failed after noting its entries): marking
/// rechecks each entry's state in the outbox, so such a name costs only its memory.
struct UnsentSlots {
    private var byLog: [ConversationID: [UInt64: OperationID]] = [:]
    private var slots: [OperationID: (log: ConversationID, sequence: UInt64)] = [:]

    func contains(_ message: OperationID) -> Bool { slots[message] != nil }

    mutating func insert(_ message: OperationID, log: ConversationID, sequence: UInt64) {
        slots[message] = (log, sequence)
        byLog[log, default: [:]][sequence] = message
    }

    mutating func remove(_ messages: some Sequence<OperationID>) {
        for message in messages {
            guard let (log, sequence) = slots.removeValue(forKey: message) else { continue }
            // (Another message may have taken the slot since: the user's two devices forked it.)
            if byLog[log]?[sequence] == message { byLog[log]?[sequence] = nil }
            if byLog[log]?.isEmpty == true { byLog[log] = nil }
        }
    }

    /// An unsent message and its slot.
    typealias Candidate = (log: ConversationID, sequence: UInt64, message: OperationID)

    /// The messages in `ranges` (of the local user's slots), by log and then sequence.
    func messages(in ranges: [SlotRange]) -> [Candidate] {
        var found: [Candidate] = []
        for range in ranges {
            guard let inLog = byLog[range.conversation] else { continue }
            // Whichever is shorter: a long acknowledged run, or the few messages still unsent.
            // (The span in UInt64: a peer's range may cover more sequences than an Int counts.)
            if UInt64(inLog.count) <= range.sequences.upperBound - range.sequences.lowerBound {
                for (sequence, message) in inLog where range.sequences.contains(sequence) {
                    found.append((range.conversation, sequence, message))
                }
            } else {
                for sequence in range.sequences {
                    if let message = inLog[sequence] { found.append((range.conversation, sequence, message)) }
                }
            }
        }
        found.sort { ($0.log, $0.sequence) < ($1.log, $1.sequence) }
        return found
    }
}
