import Foundation
import GRDB
import WeftModel

// Message parts come from the log: the partial replica keeps none.
extension OperationLog {
    /// Fills in every message snapshot's parts, which the store's partial replica does not
    /// keep: from the batch for the messages it posts, else from the message's operation in
    /// the log (a message that changes without being posted now: receipts, a merge, a fork
    /// that accepts it again). In place: a change set passed by value and returned was copied
    /// whole (each message change retained) on the first write.
    ///
    /// `includingUpdated` false leaves the parts out of the snapshots of messages the changes
    /// only update (a receipt, a move): the rows need parts only for the messages they insert,
    /// and reading them back (decoding each message's operation) costs more than the update
    /// itself. For a commit no subscriber reads messages from (`Store.changes(includingMessages:)`).
    static func fillParts(
        of changes: inout ChangeSet, from batch: [SignedOperation], includingUpdated: Bool = true, in db: Database
    ) throws {
        var parts: [OperationID: [MessagePart]] = [:]
        parts.reserveCapacity(batch.count)
        for index in batch.indices {
            if case .postMessage(let messageParts, _) = batch[index].operation.body { parts[batch[index].id] = messageParts }
        }
        for index in changes.messages.indices {
            guard let id = changes.messages[index].snapshot?.id else { continue }
            if parts[id] == nil {
                guard includingUpdated || changes.messages[index].kind == .create else { continue }
                parts[id] = try storedParts(of: id, in: db)
            }
            // As a page of messages carries them (v7): larger bodies stay in the log.
            changes.messages[index].snapshot?.parts = (parts[id] ?? []).map { $0.loaded(upTo: Materializer.loadedPartByteCount) }
        }
    }

    /// A message's parts, from its operation in the log.
    static func storedParts(of id: OperationID, in db: Database) throws -> [MessagePart] {
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
