import Foundation
import GRDB
import WeftModel

/// The operation log's replica in memory: a partial replica (`Replica+Loading.swift`) holding
/// the index of every creation and only the logs that writes need.
///
/// Opening a store reads nothing but the creations (one per conversation, found through the
/// operation table's (conversation, status, appliedOrder) index), so the first write on a store
/// of a million messages loads the merge groups it writes to, not the million operations.
/// After each write, when the logs in memory hold more than `cachedOperationLimit` operations
/// together (100,000 by default: some tens of megabytes), every log but those of the merge
/// groups the write touched is dropped; dropped logs are loaded again
/// from the operation table when a later write needs them. Memory is therefore bounded by that
/// limit plus the logs of one write's merge groups (which the merge rules need whole).
extension OperationLog {
    /// A partial replica knowing every conversation's creation, with no log loaded.
    static func indexedReplica(in db: Database, localUser: UserID) throws -> Replica {
        // A log's first accepted operation is its creation (everything else follows it), and
        // every log held has a summary (a conversation row only those shown, SPEC.md §14.9).
        let rows = try Row.fetchCursor(db, sql: """
            SELECT o.id, o.wire, o.kind FROM log_summary s
            JOIN operation o ON o.appliedOrder = (
                SELECT MIN(appliedOrder) FROM operation WHERE conversation = s.conversation AND status = 'accepted')
            """)
        var creations: [SignedOperation] = []
        while let row = try rows.next() {
            guard try row.integer(2, "operation.kind") == 1  // a creation (SPEC.md §12.3)
            else {
                throw StoreError(
                    .damagedLog, "a conversation's first accepted operation \(try row.blob(0, "operation.id").hexPrefix) is not its creation")
            }
            creations.append(try decodeOperation(row))
        }
        return Replica(localUser: localUser, creations: creations)
    }

    /// Loads into `replica` the logs it lacks for applying or building `operations` (see
    /// `Replica.logsToLoad(for:)`), inside the write transaction that needs them.
    static func loadLogs(_ ids: Set<ConversationID>, into replica: inout Replica, in db: Database) throws {
        for id in ids.sorted() { replica.load(id, operations: try storedOperations(of: id, in: db)) }
    }

    /// Every operation stored for one log (accepted, pending and refused), in the order the
    /// replica decided them: replaying them rebuilds the log.
    static func storedOperations(of id: ConversationID, in db: Database) throws -> [SignedOperation] {
        let rows = try Row.fetchCursor(
            db, sql: "SELECT id, wire FROM operation WHERE conversation = ? ORDER BY appliedOrder", arguments: [Data(id.bytes)])
        var operations: [SignedOperation] = []
        while let row = try rows.next() { operations.append(try decodeOperation(row)) }
        return operations
    }

    /// After a write: drops the logs the write did not touch once the logs in memory hold more
    /// than `limit` operations.
    static func trim(_ replica: inout Replica, keeping written: Set<ConversationID>, limit: Int) {
        guard replica.loadedOperationCount > limit else { return }
        replica.unloadLogs(exceptGroupsOf: written)
    }

    /// A complete replica built from the whole log: every stored operation replayed in the order
    /// it was decided (costs the whole log in time and memory).
    static func completeReplica(from database: any DatabaseWriter, localUser: UserID) throws -> Replica {
        var replica = Replica(localUser: localUser)
        try database.read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT id, wire FROM operation ORDER BY appliedOrder")
            var chunk: [SignedOperation] = []
            chunk.reserveCapacity(4096)
            while let row = try rows.next() {
                chunk.append(try decodeOperation(row))
                if chunk.count == 4096 {
                    _ = replica.apply(verified: chunk)
                    chunk.removeAll(keepingCapacity: true)
                }
            }
            _ = replica.apply(verified: chunk)
        }
        return replica
    }
}
