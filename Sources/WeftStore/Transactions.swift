import GRDB
import WeftModel

/// The store's write transactions: one at a time on GRDB's writer queue, which is the store's
/// lock. Owns what follows each commit, on that queue before the next write starts: the local
/// user's memberships forget what the commit moved, and the change bus publishes it, so
/// subscribers see commits in order. Writes that need the replica go through
/// `OperationLog.writeThroughReplica(_:)`, which ends the same way.
struct Transactions: Sendable {
    let database: any DatabaseWriter
    let bus: ChangeBus
    let memberships: Memberships

    /// Runs `body` in one write transaction that does not need the replica (the outbox), and
    /// publishes its changes once it commits.
    ///
    /// `syncing: false` commits without waiting for the disk (SQLite's NORMAL instead of the
    /// store's FULL): for facts whose loss in a power cut the node redoes by itself, such as a
    /// message marked sent (it is sent again, and acknowledged again). Never for a local
    /// operation or what a peer is told was stored. The commit still survives a crash of the
    /// process, and the next syncing commit (the WAL is written in order) makes it durable too.
    func write<T: Sendable>(syncing: Bool = true, _ body: @Sendable (Database) throws -> (T, Publication)) async throws -> T {
        try await database.writeWithoutTransaction { db in
            // The connection's level before (FULL on disk), put back whatever the body did: a
            // restore that fails throws rather than leave later commits unsynced.
            // (Prepared once: the pragmas ran at every acknowledgement.)
            let level = syncing ? nil : try Int.fetchOne(db.cachedStatement(sql: "PRAGMA synchronous"))
            if level != nil { try db.cachedStatement(sql: "PRAGMA synchronous = NORMAL").execute() }
            let result: (T, Publication)
            do {
                result = try Self.run(in: db) { try body(db) }
            } catch {
                if let level { try db.cachedStatement(sql: "PRAGMA synchronous = \(level)").execute() }
                throw error
            }
            if let level { try db.cachedStatement(sql: "PRAGMA synchronous = \(level)").execute() }
            self.committed(result.1)
            return result.0
        }
    }

    /// Tells what a transaction committed, on the writer queue right after the commit.
    func committed(_ publication: Publication) {
        memberships.committed(publication.changes)
        bus.publish(publication)
    }

    /// The transaction commits when `body` returns (and rolls back when it throws); a failed
    /// commit throws.
    static func run<T>(in db: Database, _ body: () throws -> T) throws -> T {
        var result: T?
        try db.inTransaction {
            result = try body()
            return .commit
        }
        // GRDB runs the block once, before it commits; without a result it threw.
        guard let result else { throw StoreError(.damagedStore, "a write transaction ended without running") }
        return result
    }
}
