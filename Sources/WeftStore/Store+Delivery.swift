import GRDB
import WeftModel

/// Signs one operation of the local user against the replica as it stands inside a write
/// (`LocalAuthor` holds the identity and the clock).
typealias LocalSigner = @Sendable (_ body: OperationBody, _ log: ConversationID, _ replica: Replica) -> SignedOperation

// The delivery rule: delivered is set by the recipient's node (DESIGN.md), when it stores the
// message, in the same transaction, so a message is never stored unacknowledged.
extension Store {
    /// Most messages one delivered receipt names: 4,096 identifiers (128 KiB), far inside an
    /// operation's 512 KiB with its causes.
    static let receiptLimit = 4096

    /// Writes the local user's delivered receipts for every message `applied` created that is
    /// addressed to the local user (the local user is a recipient, with status sent, in the log
    /// it was posted to): one receipt operation per conversation log, more only past
    /// `receiptLimit` messages in one log. Folds what they change into `applied.changes`.
    static func acknowledgeDelivery(
        in applied: inout Applied, lease: inout OperationLog.ReplicaLease, db: Database, localUser: UserID, signer: LocalSigner
    ) throws {
        var byLog: [ConversationID: [OperationID]] = [:]
        for change in applied.changes.messages where change.kind == .create {
            // A snapshot's statuses are those of its conversation's participants now (but the
            // sender), so a status for the local user says they are a participant; asking the
            // replica would cost a conversation snapshot per log.
            guard let message = change.snapshot, message.sender != localUser, message.recipientStatus[localUser] == .sent else { continue }
            assert(lease.replica.isParticipant(localUser, of: message.postedTo), "a status for a user who is not a participant")
            byLog[message.postedTo, default: []].append(message.id)
        }
        guard !byLog.isEmpty else { return }
        let slices = byLog.sorted { $0.key < $1.key }.map { log, ids in (log: log, slices: ids.sorted().chunked(receiptLimit)) }
        let rounds = slices.map(\.slices.count).max() ?? 0
        for round in 0..<rounds {
            // A log's second receipt follows its first: each round signs against the replica
            // the previous one left.
            let receipts = slices.compactMap { entry in
                round < entry.slices.count ? signer(.delivered(Array(entry.slices[round])), entry.log, lease.replica) : nil
            }
            #if DEBUG
            let expected = try expectedChanges(of: receipts, after: applied.changes, replica: lease.replica, db: db)
            #endif
            let report = lease.applyWithoutChanges(receipts)
            guard report.accepted.count == receipts.count else {
                let reason = report.rejected.first.map { "\($0.1)" } ?? "it waits for causes"
                throw StoreError(.localOperationRefused, "a delivered receipt of the local user was refused: \(reason)")
            }
            try Materializer(db: db, replica: lease.replica, localUser: localUser).writeLog(batch: receipts, report: report)
            var named: Set<OperationID> = []
            for receipt in receipts { if case .delivered(let ids) = receipt.operation.body { named.formUnion(ids) } }
            markDelivered(named, to: localUser, in: &applied.changes)
            #if DEBUG
            assert(applied.changes == expected, "the delivered receipts changed more than their messages' status")
            #endif
            applied.acknowledgements += receipts
        }
    }

    /// What the local user's delivered receipts change, without comparing snapshots: the
    /// messages they name were created in this transaction (their snapshots are in `changes`)
    /// and are now delivered to the local user, unless read already. A delivered receipt
    /// moves no count, position or other status, so nothing else changes.
    private static func markDelivered(_ ids: Set<OperationID>, to localUser: UserID, in changes: inout ChangeSet) {
        for index in changes.messages.indices {
            guard let snapshot = changes.messages[index].snapshot, ids.contains(snapshot.id),
                let status = snapshot.recipientStatus[localUser], status < .delivered
            else { continue }
            changes.messages[index].snapshot?.recipientStatus[localUser] = .delivered
        }
    }

    #if DEBUG
    /// The change set comparing snapshots would give (on a copy of the replica), for checking
    /// `markDelivered` in debug builds.
    private static func expectedChanges(
        of receipts: [SignedOperation], after changes: ChangeSet, replica: Replica, db: Database
    ) throws -> ChangeSet {
        var copy = replica
        let current = CurrentSnapshots(db: db)
        for change in changes.conversations { current.newer[change.id] = change.snapshot }
        var positions: [OperationID: Int] = [:]
        for change in changes.messages { if let snapshot = change.snapshot { positions[snapshot.id] = snapshot.position } }
        let (_, later) = copy.applyReportingChangesIncrementally(verified: receipts, current: current.read, position: { positions[$0] })
        try current.check()
        var expected = changes
        expected.fold(later)
        return expected
    }
    #endif
}

extension ChangeSet {
    /// Adds what a later batch of the same transaction changed, as one batch holding both would
    /// report it: an object created earlier is reported once, as it is now; an update of a
    /// property updated earlier keeps the first old value and the last new value (and goes if
    /// they are equal); an object created and deleted within is not reported.
    mutating func fold(_ later: ChangeSet) {
        conversations = Self.fold(conversations, later.conversations)
        messages = Self.fold(messages, later.messages)
    }

    private static func fold<Change: FoldableChange>(_ earlier: [Change], _ later: [Change]) -> [Change] {
        var result: [Change?] = earlier
        var indices: [Change.ID: [Int]] = [:]
        for (index, change) in earlier.enumerated() { indices[change.id, default: []].append(index) }
        for change in later {
            let before = (indices[change.id] ?? []).filter { result[$0] != nil }
            let created = before.contains { result[$0]?.kind == .create }
            switch change.kind {
            case .update:
                for index in before { result[index]?.snapshot = change.snapshot }
                if created { continue }
                if let index = before.first(where: { result[$0]?.property == change.property }) {
                    result[index]?.newValue = change.newValue
                    if result[index]?.oldValue == change.newValue { result[index] = nil }
                    continue
                }
            case .delete:
                for index in before { result[index] = nil }
                if created { continue }
            case .create:
                break
            }
            indices[change.id, default: []].append(result.count)
            result.append(change)
        }
        // The order `ChangeSet(from:to:)` gives: by object, then by property.
        return result.compactMap { $0 }.sorted {
            $0.id != $1.id ? $0.id < $1.id : ($0.property?.rawValue ?? -1) < ($1.property?.rawValue ?? -1)
        }
    }
}

/// What folding needs of a conversation or message change.
private protocol FoldableChange {
    associatedtype ID: Comparable & Hashable
    associatedtype Property: RawRepresentable & Equatable where Property.RawValue == Int
    associatedtype Snapshot
    var id: ID { get }
    var kind: ChangeSet.Kind { get }
    var property: Property? { get }
    var oldValue: ChangeSet.Value { get }
    var newValue: ChangeSet.Value { get set }
    var snapshot: Snapshot? { get set }
}

extension ChangeSet.ConversationChange: FoldableChange {}
extension ChangeSet.MessageChange: FoldableChange {}
