import Synchronization
import WeftModel

/// The local user's membership of conversations as the store last read it, for sends: each
/// send checks it, and reading it (a reader connection and a query) was a tenth of a busy
/// sender's time. A commit that changes anything but a conversation's counters (participants,
/// merges, creations, deletions) forgets them all; a read that such a commit overtook is not
/// kept (`generation`). `ConversationQueries` reads and keeps entries; `Transactions` tells
/// it every commit.
final class Memberships: Sendable {
    typealias Membership = (canonical: ConversationID, isParticipant: Bool)

    private struct State {
        var entries: [ConversationID: Membership] = [:]
        /// Counts the commits that forgot the entries.
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Past this many conversations the entries start over (a bound, not a working set).
    static let limit = 4096

    /// The entry for `id` if kept, and the generation a read starting now is made at.
    func lookUp(_ id: ConversationID) -> (known: Membership?, generation: UInt64) {
        state.withLock { ($0.entries[id], $0.generation) }
    }

    /// Keeps what a read found, unless a commit forgot the entries since it started.
    func keep(_ membership: Membership, for id: ConversationID, readAt generation: UInt64) {
        state.withLock { state in
            guard generation == state.generation else { return }
            if state.entries.count >= Self.limit { state.entries = [:] }
            state.entries[id] = membership
        }
    }

    /// Called once a commit is visible to readers, with what it changed.
    func committed(_ changes: ChangeSet) {
        let counters: Set<ChangeSet.ConversationChange.Property> = [.messageCount, .unreadCount, .lastMessageAt]
        let moved = changes.conversations.contains { change in
            change.kind != .update || change.property.map { !counters.contains($0) } ?? true
        }
        guard moved else { return }
        state.withLock { state in
            state.entries = [:]
            state.generation += 1
        }
    }
}
