import WeftModel

// Answering WANT (SPEC.md §14.5): the peer says what it holds of some logs; this node learns
// it and sends the rest from its store, in the order asked.

extension SyncCore {
    // MARK: - WANT

    mutating func receiveWant(_ want: SyncMessage.Want, from peer: PeerID) {
        if want.isGraft { peers[peer]?.isEager = true }
        var ids: [OperationID] = []
        for entry in want.entries {
            let conversation = entry.conversation
            if let beyond = entry.beyond {
                peers[peer]?.record(beyond, in: conversation)
                for (author, sequence) in beyond.entries { learn(author, sequence, in: conversation) }
                // Equal heads and different digests: heads cannot say what differs.
                if let own = logs[conversation], let theirs = peers[peer]?.summaryDigests[conversation],
                    theirs != own.digest, beyond == own.heads
                {
                    peers[peer]?.suspectedForks[conversation] = PeerState.DigestPair(ours: own.digest, theirs: theirs)
                }
            }
            // An unpublished log is not offered, even to a peer that names it.
            guard logs[conversation]?.isPublished == true else { continue }
            if let beyond = entry.beyond { sendFromStore(conversation, to: peer, beyond: beyond) }
            ids += entry.ids
        }
        if !ids.isEmpty { output.append(.sendStoredOperations(peer, ids)) }
    }
}
