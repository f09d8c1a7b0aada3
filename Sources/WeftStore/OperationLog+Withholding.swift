import Foundation
import GRDB
import WeftModel

// Withholding (SPEC.md §13.3, §13.7): what the removal rule judges, read from the log.
extension OperationLog {
    /// `Store.withheld(_:from:)`: the operations replication must not send to `user`'s node.
    func withheld(_ operations: [SignedOperation], from user: UserID) throws -> Set<OperationID> {
        guard !operations.isEmpty else { return [] }
        let replica = try replica(holdingGroupsOf: Set(operations.map(\.operation.conversation)))
        return Set(operations.filter { replica.withholds($0, from: user) }.map(\.id))
    }

    /// `Store.fetchCausalPasts(of:)`: each operation's causal past, as the log holds it.
    func fetchCausalPasts(of operations: [SignedOperation]) async throws -> [OperationID: VersionVector] {
        guard !operations.isEmpty else { return [:] }
        let logs = Set(operations.map(\.operation.conversation))
        if let cached = cachedReplica(holding: logs) { return Self.causalPasts(of: operations, on: cached) }
        let localUser = self.localUser
        return try await database.read { db in
            Self.causalPasts(of: operations, on: try Self.groupReplica(for: logs, localUser: localUser, in: db))
        }
    }

    private static func causalPasts(of operations: [SignedOperation], on replica: Replica) -> [OperationID: VersionVector] {
        var pasts: [OperationID: VersionVector] = [:]
        for signed in operations { pasts[signed.id] = replica.causalPast(of: signed) }
        return pasts
    }

    /// `Store.membershipFacts()`: what the removal rule is told at start.
    func membershipFacts() throws -> [LogMembership] {
        let logs = try logsWithRemovals()
        guard !logs.isEmpty else { return [] }
        return try replica(holdingGroupsOf: logs).membershipFacts(forGroupsOf: logs.sorted())
    }

    /// The store's replica if it holds the merge groups of `logs`, else one read for them.
    private func replica(holdingGroupsOf logs: Set<ConversationID>) throws -> Replica {
        if let cached = cachedReplica(holding: logs) { return cached }
        return try database.read { db in try Self.groupReplica(for: logs, localUser: localUser, in: db) }
    }

    /// Logs holding a removal of participants (kind 3): only their merge groups can withhold
    /// anything (§13.3). One scan of the operation table.
    func logsWithRemovals() throws -> Set<ConversationID> {
        try database.read(Self.logsWithRemovals)
    }

    private static func logsWithRemovals(in db: Database) throws -> Set<ConversationID> {
        var logs: Set<ConversationID> = []
        for data in try Data.fetchAll(db.cached("SELECT DISTINCT conversation FROM operation WHERE kind = 3")) {
            logs.insert(try Stored.conversationID(data, "operation.conversation"))
        }
        return logs
    }

    /// The store's own replica if it has the logs of the merge groups of `logs` in memory (a
    /// copy: nothing here changes it); nil when they must be read.
    private func cachedReplica(holding logs: Set<ConversationID>) -> Replica? {
        guard let cached = slot.withLock({ $0.replica }), cached.logsToLoad(forLogs: logs).isEmpty else { return nil }
        return cached
    }

    /// A complete replica of the logs of the merge groups of `logs`, read from the operation table.
    static func groupReplica(for logs: Set<ConversationID>, localUser: UserID, in db: Database) throws -> Replica {
        var members: Set<ConversationID> = logs
        for chunk in Array(logs).chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for data in try Data.fetchAll(
                db.cached("""
                    SELECT id FROM conversation WHERE canonical IN (SELECT canonical FROM conversation WHERE id IN (\(marks)))
                    """), arguments: StatementArguments(chunk.map { Data($0.bytes) }))
            {
                members.insert(try WeftStore.Stored.conversationID(data, "conversation.id"))
            }
        }
        var replica = Replica(localUser: localUser)
        var operations: [SignedOperation] = []
        // Each log lies whole in one chunk, in the order it was decided.
        for chunk in members.sorted().chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            operations += try Row.fetchAll(
                db.cached("SELECT id, wire FROM operation WHERE conversation IN (\(marks)) ORDER BY appliedOrder"),
                arguments: StatementArguments(chunk.map { Data($0.bytes) })
            ).map(Self.decodeOperation)
        }
        _ = replica.apply(verified: operations)
        return replica
    }
}
