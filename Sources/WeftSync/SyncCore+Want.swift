import WeftModel

// Answering WANT (SPEC.md §14.5): the peer says what it holds of some logs; this node learns
// it and sends the rest from its store, most recently active first.

extension SyncCore {
    // MARK: - WANT

    mutating func receiveWant(_ want: SyncMessage.Want, from peer: ConnectionNumber) {
        if want.isGraft { peers[peer]?.isEager = true }
        var answered: [ConversationID: VersionVector] = [:]
        var ids: [OperationID] = []
        for entry in want.entries {
            let conversation = entry.conversation
            // A log not held here has nothing to answer; what the peer holds of it counts as
            // unsynced (bounded in `learn`), and nothing else of it is remembered.
            guard logs[conversation] != nil else {
                for (author, sequence) in entry.beyond?.entries ?? [:] { learn(author, sequence, in: conversation) }
                continue
            }
            if let beyond = entry.beyond {
                peers[peer]?.record(beyond, in: conversation)
                for (author, sequence) in beyond.entries { learn(author, sequence, in: conversation) }
                // Asked for with heads equal to ours: heads cannot say what differs (§14.10).
                if let own = logs[conversation], beyond == own.heads {
                    peers[peer]?.suspectedForks[conversation] = own.digest
                }
            }
            // An unpublished log is not offered, even to a peer that names it.
            guard logs[conversation]?.isPublished == true else { continue }
            if let beyond = entry.beyond { answered[conversation] = beyond }
            ids += entry.ids
        }
        // Most recently active first by this node's logs: the asker cannot know the activity
        // of logs it lacks (catch-up order, §14.10).
        for conversation in catchUpOrder(answered.keys) {
            guard let beyond = answered[conversation] else { continue }
            sendFromStore(conversation, to: peer, beyond: beyond)
        }
        for chunk in ids.chunked(Self.identifiersPerRead) { sendStoredOperations(chunk, to: peer) }
    }
}
