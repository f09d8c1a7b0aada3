import GRDB
import WeftModel

extension Store {
    /// Canonical conversations as their rows say, which is what the replica says between
    /// writes (a change set starts from them instead of recomputing them from every message).
    /// `applyReportingChangesIncrementally` cannot throw through its callback: a failed read is
    /// kept and thrown after it (the transaction then rolls back), never taken for "no row".
    final class CurrentSnapshots {
        let db: Database
        /// Snapshots known to be newer than the rows (from a change set this transaction made).
        var newer: [ConversationID: ConversationSnapshot] = [:]
        /// Rows read ahead (`prefetch`), nil where a conversation has no canonical row.
        private var fetched: [ConversationID: ConversationSnapshot?] = [:]
        private var failure: (any Error)?

        init(db: Database) { self.db = db }

        /// Reads the rows of `ids` at once: reading them one at a time costs four queries each,
        /// prepared anew for their lists, and a batch of a catch-up touches a hundred.
        func prefetch(_ ids: Set<ConversationID>) throws {
            for id in ids { fetched[id] = .some(nil) }
            for snapshot in try ConversationQueries.conversations(ids: Array(ids), in: db) { fetched[snapshot.id] = snapshot }
        }

        func read(_ id: ConversationID) -> ConversationSnapshot? {
            if let snapshot = newer[id] { return snapshot }
            if let snapshot = fetched[id] { return snapshot }
            guard failure == nil else { return nil }
            do {
                return try ConversationQueries.conversations(ids: [id], in: db).first
            } catch {
                failure = error
                return nil
            }
        }

        func check() throws {
            if let failure { throw failure }
        }
    }
}
