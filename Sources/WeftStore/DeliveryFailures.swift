import Foundation
import GRDB
import WeftModel

/// Delivery failures: per-recipient failure of the local user's messages, a local record (never
/// replicated) that a recipient's node did not deliver in time or refused. Owns the
/// `delivery_failure` table: recording failures (by hand, or when a message's time to live runs
/// out with its outbox entry, `Outbox.expireOutbox`) and showing them over the replicated
/// statuses, as `RecipientStatus.failed` while a status is below delivered: a delivery that
/// arrives later wins. Readers of messages show them (`MessageQueries`), and so do commits'
/// change sets (`withDeliveryFailures`).
struct DeliveryFailures: Sendable {
    let localUser: UserID
    let transactions: Transactions

    /// `Store.failDelivery(of:to:reason:wallMilliseconds:)`: records that the local user's
    /// `message` failed for `recipients` (every recipient not yet delivered when nil); returns
    /// those that failed now.
    func failDelivery(
        of message: OperationID, to recipients: Set<UserID>? = nil, reason: DeliveryFailure, wallMilliseconds: UInt64
    ) async throws -> Set<UserID> {
        let localUser = self.localUser
        return try await transactions.write { db in
            guard let before = try MessageQueries.message(message, in: db), before.sender == localUser else {
                throw StoreError(.unknownMessage, "the store has no message \(message) of the local user")
            }
            let failed = try Self.recordFailures(of: before, to: recipients, reason: reason.description, now: wallMilliseconds, in: db)
            guard !failed.isEmpty, let after = try MessageQueries.message(message, in: db) else { return (failed, Publication()) }
            var changes = ChangeSet()
            changes.messages = [.recipientStatusUpdate(of: after, from: before.recipientStatus)]
            return (failed, Publication(changes: changes))
        }
    }

    /// The failure reason of every recipient of `snapshot` (or of `recipients`) whose status is
    /// below delivered and who has none yet; returns them.
    static func recordFailures(
        of snapshot: MessageSnapshot, to recipients: Set<UserID>?, reason: String, now: UInt64, in db: Database
    ) throws -> Set<UserID> {
        let insert = try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO delivery_failure (message, recipient, reason, failedAt) VALUES (?, ?, ?, ?)
            """)
        var failed: Set<UserID> = []
        for (user, status) in snapshot.recipientStatus where status < .failed && recipients?.contains(user) ?? true {
            try insert.execute(arguments: [Data(snapshot.id.bytes), Data(user.bytes), reason, Int64(clamping: now)])
            if db.changesCount > 0 { failed.insert(user) }
        }
        return failed
    }

    /// Fails, for every recipient not yet delivered, the local user's messages whose time to
    /// live ran out by `now`, sent or not (once per message). Returns their changes.
    /// `waitingReasons`: why a message still waited (`Outbox.noteWaiting`), added to its
    /// recipients' failure.
    static func expireRecipients(now: UInt64, waitingReasons: [Data: String] = [:], in db: Database) throws -> [ChangeSet.MessageChange] {
        let rows = try Row.fetchAll(
            db.cached("SELECT message, expiresAt - createdAt FROM outbox WHERE recipientsChecked = 0 AND expiresAt <= ?"),
            arguments: [Int64(clamping: now)])
        var changes: [ChangeSet.MessageChange] = []
        for row in rows {
            let message = try row.operationID(0, "outbox.message")
            try db.execute(sql: "UPDATE outbox SET recipientsChecked = 1 WHERE message = ?", arguments: [Data(message.bytes)])
            guard let before = try MessageQueries.message(message, in: db) else { continue }
            let timeToLive = try row.integer(1, "outbox.expiresAt - outbox.createdAt")
            let reason = DeliveryFailure.expired(timeToLive: UInt64(clamping: timeToLive)).description
                + (waitingReasons[Data(message.bytes)].map { "; \($0)" } ?? "")
            guard !(try recordFailures(of: before, to: nil, reason: reason, now: now, in: db)).isEmpty,
                let after = try MessageQueries.message(message, in: db)
            else { continue }
            changes.append(.recipientStatusUpdate(of: after, from: before.recipientStatus))
        }
        return changes
    }

    // MARK: - Showing failures

    /// The failure records of these messages: reason per message and recipient.
    static func failureReasons(of messages: some Collection<Data>, in db: Database) throws -> [Data: [UserID: String]] {
        var reasons: [Data: [UserID: String]] = [:]
        // Most stores have no failure at all: one lookup instead of a list query to prepare.
        guard !messages.isEmpty, try Bool.fetchOne(db.cached("SELECT EXISTS (SELECT 1 FROM delivery_failure)")) == true else { return reasons }
        for chunk in Array(messages).chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try Row.fetchAll(
                db.cached("SELECT message, recipient, reason FROM delivery_failure WHERE message IN (\(marks))"),
                arguments: StatementArguments(chunk))
            {
                reasons[try row.blob(0, "delivery_failure.message"), default: [:]][try row.userID(1, "delivery_failure.recipient")] =
                    try row.text(2, "delivery_failure.reason")
            }
        }
        return reasons
    }

    /// `statuses` with `failed` for each recipient that has a failure record and is not yet
    /// delivered (later facts win), and the reasons of those.
    static func overlay(
        _ statuses: [UserID: RecipientStatus], failures: [UserID: String]?
    ) -> (statuses: [UserID: RecipientStatus], reasons: [UserID: String]) {
        guard let failures, !failures.isEmpty else { return (statuses, [:]) }
        var statuses = statuses
        var reasons: [UserID: String] = [:]
        for (user, reason) in failures {
            guard let status = statuses[user], status < .failed else { continue }
            statuses[user] = .failed
            reasons[user] = reason
        }
        return (statuses, reasons)
    }

    /// A write's change set with the delivery failures of the local user's messages shown, as
    /// readers of the tables see them (the replica knows nothing of them). Called once the rows
    /// are written: they keep the replicated statuses.
    static func withDeliveryFailures(_ changes: ChangeSet, localUser: UserID, in db: Database) throws -> ChangeSet {
        let own = changes.messages.compactMap { $0.snapshot?.sender == localUser ? Data($0.id.bytes) : nil }
        guard !own.isEmpty else { return changes }
        let failures = try failureReasons(of: Set(own), in: db)
        guard !failures.isEmpty else { return changes }
        var result = changes
        result.messages = changes.messages.compactMap { change in
            guard let snapshot = change.snapshot, let failed = failures[Data(snapshot.id.bytes)] else { return change }
            var change = change
            let (statuses, reasons) = overlay(snapshot.recipientStatus, failures: failed)
            change.snapshot?.recipientStatus = statuses
            change.snapshot?.failureReasons = reasons
            if change.property == .recipientStatus, case .statuses(let old) = change.oldValue, case .statuses(let new) = change.newValue {
                change.oldValue = .statuses(overlay(old, failures: failed).statuses)
                change.newValue = .statuses(overlay(new, failures: failed).statuses)
                if change.oldValue == change.newValue { return nil }
            }
            return change
        }
        return result
    }
}
