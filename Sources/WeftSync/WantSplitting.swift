import WeftModel

// How a list of WANT entries becomes messages that fit (SPEC.md §14.5). What a node asks for
// grows with what its peers told it (announcements, missing causes, differing logs), so no
// entry may be assumed to fit one message: an entry's identifiers are spread over as many
// entries as they need, each in a message of its own (a message names a conversation once).

extension SyncMessage.Want {
    /// Identifiers one WANT entry carries at most in a body of `bodyLimit` bytes, besides
    /// a conversation and no heads.
    static func identifiersPerEntry(bodyLimit: Int) -> Int {
        let room = bodyLimit - 3 - ConversationID.byteCount - 1 - 2
        return max(1, min(SyncMessage.maxListCount, room / OperationID.byteCount))
    }

    /// Authors one entry's heads hold at most in a body of `bodyLimit` bytes.
    static func headsPerEntry(bodyLimit: Int) -> Int {
        let room = bodyLimit - 3 - ConversationID.byteCount - 1 - 2 - 2
        return max(1, min(SyncMessage.maxListCount, room / SyncMessage.headByteCount))
    }

    /// `entries` as WANT messages whose bodies stay under `softLimit` bytes where an entry
    /// allows it, and never over `SyncEnvelope.maxBodyByteCount`; in order, each conversation
    /// at most once per message.
    ///
    /// An entry with more identifiers than fit is split into entries of the same conversation,
    /// the first with its heads. Heads with more authors than fit a body (tens of thousands of
    /// authors in one log) keep those that fit: leaving an author out asks for more of its
    /// operations than needed, never for fewer.
    static func messages(_ entries: [Entry], isGraft: Bool, softLimit: Int) -> [SyncMessage.Want] {
        let hardLimit = SyncEnvelope.maxBodyByteCount
        let limit = min(softLimit, hardLimit)
        let idsPerPiece = identifiersPerEntry(bodyLimit: limit)
        var pieces: [Entry] = []
        pieces.reserveCapacity(entries.count)
        for var entry in entries {
            if let beyond = entry.beyond, beyond.entries.count > headsPerEntry(bodyLimit: hardLimit) {
                entry.beyond = beyond.truncated(to: headsPerEntry(bodyLimit: hardLimit))
            }
            guard entry.ids.count > idsPerPiece || SyncMessage.byteCount(of: entry) > hardLimit - 3 else {
                pieces.append(entry)
                continue
            }
            // The first piece carries the heads, so it takes fewer identifiers.
            let headsBytes = entry.beyond.map { 2 + $0.entries.count * SyncMessage.headByteCount } ?? 0
            var first = max(1, (limit - 3 - ConversationID.byteCount - 1 - 2 - headsBytes) / OperationID.byteCount)
            first = min(first, idsPerPiece)
            var start = 0
            var beyond = entry.beyond
            while start < entry.ids.count || beyond != nil {
                let count = min(beyond != nil ? first : idsPerPiece, entry.ids.count - start)
                pieces.append(Entry(conversation: entry.conversation, beyond: beyond, ids: Array(entry.ids[start..<start + count])))
                start += count
                beyond = nil
            }
        }

        var messages: [SyncMessage.Want] = []
        var run: [Entry] = []
        var runBytes = 3
        var conversations: Set<ConversationID> = []
        for piece in pieces {
            let bytes = SyncMessage.byteCount(of: piece)
            if !run.isEmpty,
                runBytes + bytes > limit || run.count == SyncMessage.maxListCount || conversations.contains(piece.conversation)
            {
                messages.append(SyncMessage.Want(isGraft: isGraft, entries: run))
                run = []
                runBytes = 3
                conversations = []
            }
            run.append(piece)
            runBytes += bytes
            conversations.insert(piece.conversation)
        }
        if !run.isEmpty { messages.append(SyncMessage.Want(isGraft: isGraft, entries: run)) }
        return messages
    }
}

extension VersionVector {
    /// The entries of the first `count` authors in key order: the same vector always keeps
    /// the same authors.
    func truncated(to count: Int) -> VersionVector {
        var kept = VersionVector()
        for (author, sequence) in entries.sorted(by: { $0.key < $1.key }).prefix(count) { kept.set(author, sequence) }
        return kept
    }
}
