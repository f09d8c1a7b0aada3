import Foundation
import GRDB
import WeftModel

extension Store {
    /// The change set with every message snapshot's parts, which the store's partial replica
    /// does not keep: from the batch for the messages it posts, else from the message's
    /// operation in the log (a message that changes without being posted now: receipts, a
    /// merge, a fork that accepts it again).
    ///
    /// `includingUpdated` false leaves the parts out of the snapshots of messages the changes
    /// only update (a receipt, a move): the rows need parts only for the messages they insert,
    /// and reading them back (decoding each message's operation) costs more than the update
    /// itself. For a commit no subscriber reads messages from (`Store.changes(includingMessages:)`).
    static func withParts(
        _ changes: ChangeSet, from batch: [SignedOperation], includingUpdated: Bool = true, in db: Database
    ) throws -> ChangeSet {
        var parts: [OperationID: [MessagePart]] = [:]
        for signed in batch {
            if case .postMessage(let messageParts, _) = signed.operation.body { parts[signed.id] = messageParts }
        }
        var filled = changes
        for index in filled.messages.indices {
            guard let id = filled.messages[index].snapshot?.id else { continue }
            if parts[id] == nil {
                guard includingUpdated || filled.messages[index].kind == .create else { continue }
                parts[id] = try storedParts(of: id, in: db)
            }
            filled.messages[index].snapshot!.parts = parts[id]!
        }
        return filled
    }

    /// A message's parts, from its operation in the log.
    private static func storedParts(of id: OperationID, in db: Database) throws -> [MessagePart] {
        guard let wire = try Data.fetchOne(
            db.cachedStatement(sql: "SELECT wire FROM operation WHERE id = ?"), arguments: [Data(id.bytes)])
        else { throw StoreError(.damagedLog, "message \(id) is not in the operation log") }
        let signed: SignedOperation
        do {
            signed = try SignedOperation(wireBytes: [UInt8](wire), claimedID: id)
        } catch {
            throw StoreError(.damagedLog, "operation \(id) in the log does not decode: \(error)")
        }
        guard case .postMessage(let parts, _) = signed.operation.body else {
            throw StoreError(.damagedLog, "operation \(id) in the log is not a message")
        }
        return parts
    }
}
