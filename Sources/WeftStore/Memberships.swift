import WeftModel

/// The local user's membership of conversations as the store last read it, for sends: each
/// send checks it, and reading it (a reader connection and a query) was a tenth of a busy
/// sender's time. A commit that changes anything but a conversation's counters (participants,
/// merges, creations, deletions) forgets them all; a read that such a commit overtook is not
/// kept (`generation`).
struct Memberships {
    private(set) var entries: [ConversationID: (canonical: ConversationID, isParticipant: Bool)] = [:]
    /// Counts the commits that forgot the entries.
    private(set) var generation: UInt64 = 0
    /// Past this many conversations the entries start over (a bound, not a working set).
    static let limit = 4096

    /// Keeps what a read found, unless a commit forgot the entries since it started.
    mutating func keep(_ membership: (canonical: ConversationID, isParticipant: Bool), for id: ConversationID, readAt generation: UInt64) {
        guard generation == self.generation else { return }
        if entries.count >= Self.limit { entries = [:] }
        entries[id] = membership
    }

    /// Called once a commit is visible to readers, with what it changed.
    mutating func committed(_ changes: ChangeSet) {
        let counters: Set<ChangeSet.ConversationChange.Property> = [.messageCount, .unreadCount, .lastMessageAt]
        let moved = changes.conversations.contains { change in
            change.kind != .update || change.property.map { !counters.contains($0) } ?? true
        }
        guard moved else { return }
        entries = [:]
        generation += 1
    }
}
