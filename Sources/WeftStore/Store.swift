import Dispatch
import Foundation
import GRDB
import Synchronization
import WeftCrypto
import WeftModel

/// A node's conversations on disk: the operation log, the state it implies (materialized in
/// tables readers query), and the outbox. One `Sendable` type over `any DatabaseWriter`: a
/// `DatabasePool` in WAL mode on disk, an in-memory `DatabaseQueue` in tests.
///
/// Writes go through the in-memory `Replica` (the merge rules) and then to SQLite in one
/// transaction, so the tables always equal what the replica says. Reads go to SQLite only, so
/// a large store stays cheap in memory: the replica in memory is partial (see
/// `Store+Loading.swift`), built on the first write from the index of creations and holding
/// only the logs writes need, and a process that only queries never builds it.
///
/// Every write is `async` and runs on GRDB's writer queue, which is the store's lock: writers
/// wait their turn without holding a thread of the cooperative pool across SQLite's fsync.
/// After each commit, whoever wrote, the store tells every `changes()` subscriber what changed.
/// `LocalAuthor` writes as the local user (signing, the clock, delivered receipts) over a store.
public final class Store: Sendable {
    /// The database file inside the store's directory.
    public static let fileName = "weft.sqlite"
    /// How far ahead of the wall clock a peer's timestamp may be (SPEC.md §13.1: 60 s).
    public static let defaultFutureTolerance: UInt64 = 60_000

    /// The user whose unread flags and counts the store keeps.
    public let localUser: UserID
    /// Milliseconds a received operation's timestamp may be ahead of the wall clock.
    public let futureTolerance: UInt64
    /// How many operations the conversation logs kept in memory between writes may hold
    /// together (see `Store+Loading.swift`).
    public let cachedOperationLimit: Int
    /// How many operations waiting for causes one log may hold; a commit that leaves more
    /// deletes the oldest (see `Store+Pending.swift`).
    public let pendingLimit: Int
    /// Milliseconds before the wall clock an operation waiting for causes may be stamped: a
    /// commit deletes older ones it would leave waiting, and `expirePending(olderThan:)`
    /// (called with the wall clock less this) deletes those held.
    public let pendingLifetime: UInt64
    let database: any DatabaseWriter
    /// The partial replica, nil until a write needs it. Only a write on GRDB's writer queue changes it,
    /// lent out of the slot for the transaction (so it changes in place, uncopied) and put back
    /// once the transaction commits; a write that fails leaves it to be rebuilt from the log.
    let state = Mutex(ReplicaSlot())
    /// Who listens to `changes()`, and the number of the last batch published.
    let subscribers = ChangeSubscribers()
    /// The local user's unsent messages by slot, for acknowledgements (`UnsentSlots`).
    let unsent = Mutex(UnsentSlots())
    /// The local user's membership of conversations, for sends (`Memberships`).
    let memberships = Mutex(Memberships())

    struct ReplicaSlot {
        var replica: Replica?
        /// A write holds the replica: the slot is empty without meaning it must be rebuilt.
        var lent = false
        /// Counts every time the replica changed hands (a commit, a failed write, `forget`), so
        /// a replica built from a read that a commit overtook is not kept.
        var generation: UInt64 = 0
    }

    /// Opens (or creates) a store.
    /// - Parameters:
    ///   - directory: where `weft.sqlite` lives (created if missing); nil keeps the store in
    ///     memory, for tests.
    ///   - localUser: the user this node belongs to; a store on disk refuses another.
    ///   - cachedOperationLimit: past this many operations in the logs in memory, a write drops
    ///     the logs it did not touch.
    ///   - pendingLimit: how many operations waiting for causes one log may hold.
    ///   - pendingLifetime: how long before the wall clock a waiting operation may be stamped.
    public init(
        directory: URL?, localUser: UserID, futureTolerance: UInt64 = Store.defaultFutureTolerance,
        cachedOperationLimit: Int = Store.defaultCachedOperationLimit, pendingLimit: Int = Store.defaultPendingLimit,
        pendingLifetime: UInt64 = Store.defaultPendingLifetime
    ) throws {
        // A programmer's argument (the node passes the default), not input.
        precondition(pendingLimit >= 0, "a log cannot hold fewer than no pending operations")
        self.localUser = localUser
        self.futureTolerance = futureTolerance
        self.cachedOperationLimit = cachedOperationLimit
        self.pendingLimit = pendingLimit
        self.pendingLifetime = pendingLifetime
        var configuration = Configuration()
        configuration.label = "weft.store"
        configuration.foreignKeysEnabled = true
        if let directory {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let pool = try DatabasePool(path: directory.appendingPathComponent(Self.fileName).path, configuration: configuration)
            // GRDB picks NORMAL for WAL, which can lose the last commits on power loss (never on
            // a process crash). A message accepted for sending must survive both: FULL syncs
            // the WAL on every commit. Only the writer connection commits.
            // The writer's page cache (64 MiB, SQLite's default is 2 MiB) holds the indexes that
            // writes reach at random (operation and message identifiers) in large stores;
            // readers keep the default, so a process that only queries stays small.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.execute(sql: "PRAGMA cache_size = -65536")
            }
            database = pool
        } else {
            database = try DatabaseQueue(configuration: configuration)
        }
        try Schema.migrator.migrate(database)
        try database.write { db in
            let key = Data(localUser.bytes)
            if let stored = try Data.fetchOne(db, sql: "SELECT value FROM setting WHERE key = 'localUser'") {
                guard stored == key else {
                    throw StoreError(
                        .wrongLocalUser,
                        "the store at \(directory?.path ?? "memory") belongs to user "
                            + "\(PublicIdentity(unvalidatedBytes: [UInt8](stored))), not \(localUser)")
                }
            } else {
                try db.execute(sql: "INSERT INTO setting (key, value) VALUES ('localUser', ?)", arguments: [key])
            }
        }
        let unsentSlots = try database.read(Self.unsentSlots)
        unsent.withLock { $0 = unsentSlots }
    }

    deinit { subscribers.finishAll() }

    // MARK: - The replica

    /// The complete replica, rebuilt from the whole log on every call: every stored operation
    /// (accepted, pending and rejected) replayed in applied order. Rejected ones are refused
    /// again, pending ones wait again, so the result is the replica that wrote the log. It costs
    /// the whole log in time and memory, so it is for tests and tools on small stores; writers
    /// use `commitLocal(building:)`, which builds against the store's own (partial) replica.
    public var replica: Replica {
        get throws { try Self.completeReplica(from: database, localUser: localUser) }
    }

    /// Drops the replica from memory: the next write builds it again (after a bulk write that
    /// went around it).
    func forgetReplica() {
        state.withLock {
            $0.replica = nil
            $0.generation += 1
        }
    }

    /// Builds the partial replica (the index of creations, no log loaded) and keeps it, unless
    /// a write got there first. Reads outside the lock (an in-memory `DatabaseQueue`
    /// serializes reads with writes, and a write takes the lock to borrow the replica).
    func loadReplica() async throws {
        let generation = state.withLock { $0.generation }
        let localUser = self.localUser
        keep(try await database.read { db in try Self.indexedReplica(in: db, localUser: localUser) }, readAt: generation)
    }

    /// `loadReplica()` blocking the calling thread, for the synchronous `checkSignatures(_:)`.
    func loadReplicaBlocking() throws {
        let generation = state.withLock { $0.generation }
        keep(try database.read { db in try Self.indexedReplica(in: db, localUser: localUser) }, readAt: generation)
    }

    /// Keeps a replica read when the generation was `generation`.
    private func keep(_ replica: Replica, readAt generation: UInt64) {
        state.withLock { state in
            // Kept only if nothing changed hands since the read began: a write needs the
            // replica in the slot to commit a change, so the index read is then current.
            if state.replica == nil && !state.lent && state.generation == generation { state.replica = replica }
        }
    }

    // MARK: - Applying received operations

    /// An operation refused on receipt, before the merge rules: a bad signature, or a timestamp
    /// too far ahead of the wall clock (the peer may offer it again later). Not stored.
    public struct Refusal: Sendable, Hashable {
        public var operation: OperationID
        public var error: OperationError
    }

    /// What a write did.
    public struct Applied: Sendable {
        /// What the merge rules did with each operation (accepted, pending, rejected, duplicate).
        public var report: Replica.Report
        /// Operations refused on receipt (signatures, clocks), and received operations that would
        /// wait for causes past the store's bounds (`OperationError.Reason.pendingLimit`, not
        /// stored); always empty for local writes.
        public var refused: [Refusal]
        /// What readers see change (the delivered receipts written with it included).
        public var changes: ChangeSet
        /// The local user's delivered receipts written in the same commit (`LocalAuthor.receive`).
        public var acknowledgements: [SignedOperation] = []
        /// Received operations stored for the first time (each counted once), in batch order.
        public var newOperations: [OperationID] = []
        /// Received operations the store held already (in any status), or that repeat one
        /// earlier in the batch; refused ones are in `refused` instead.
        public var duplicateCount = 0
        /// Received operations (new or not) that wait for causes after this commit.
        public var pendingCount = 0
        /// Operations that waited for causes before this commit and that it deleted, to keep
        /// their log within `Store.pendingLimit` or because they are stamped longer ago than
        /// `Store.pendingLifetime`: replication counts them released from pending. Their logs'
        /// new summaries are in `summaries`.
        public var droppedPending: [OperationID] = []
        /// The new summary of every log this commit stored operations in, published, or deleted
        /// pending operations from (`CommittedChanges.summaries`); a log left holding nothing has
        /// `operationCount` 0 and is unpublished.
        public var summaries: [LogSummary] = []
        /// What this commit made available to the mesh (`CommittedChanges.storedOperations`).
        public var storedOperations: [SignedOperation] = []
        /// What the removal rule is told after this commit (`CommittedChanges.memberships`).
        public var memberships: [LogMembership] = []

        /// How many received operations were stored for the first time.
        public var newCount: Int { newOperations.count }
    }

    /// Stores operations received from peers *as they are*: it writes no receipts. A node
    /// applies what it receives through `LocalAuthor.receive(_:)`, which also acknowledges the
    /// delivery of new messages in the same commit; this is for tools, tests and benchmarks.
    ///
    /// Verifies signatures in parallel over the cores (outside the writer), refuses bad
    /// signatures and timestamps more than `futureTolerance` ahead of `wallMilliseconds`,
    /// applies the rest to the replica, and writes in one transaction the operation log
    /// (accepted, pending, rejected with its reason) and the rows of every conversation and
    /// message that changed.
    public func apply(received operations: [SignedOperation], wallMilliseconds: UInt64) async throws -> Applied {
        let batch = try await checkSignatures(operations)
        return try await apply(received: batch, wallMilliseconds: wallMilliseconds, acknowledgingWith: nil)
    }

    /// Received operations whose signatures have been checked (`checkSignatures(_:)`), ready
    /// for `apply(received:wallMilliseconds:)`.
    ///
    /// Checking is the expensive part of accepting an operation and runs outside the writer:
    /// a node checks the next batch while the store writes the one before it.
    public struct CheckedBatch: Sendable {
        public let operations: [SignedOperation]
        /// Per operation, whether its signature verifies.
        let valid: [Bool]
    }

    /// Checks the signatures of received operations, in parallel over the cores. Operations
    /// the replica already accepted need no second check (a peer resending); while a write
    /// holds the replica, everything is checked rather than waiting, and an operation of a log
    /// not in memory is checked too.
    ///
    /// The calling task waits suspended, holding no thread: the checkers' threads
    /// (`SignatureCheckers`) resume it when the last chunk is checked, and the replica, when
    /// it must be built first, is read through GRDB's async read.
    public func checkSignatures(_ operations: [SignedOperation]) async throws -> CheckedBatch {
        if state.withLock({ $0.replica == nil && !$0.lent }) { try await loadReplica() }
        return CheckedBatch(operations: operations, valid: await Self.verifySignatures(operations, skipping: knownToReplica(operations)))
    }

    /// `checkSignatures(_:)` that blocks the calling thread until every signature is checked
    /// (and while the replica is read). Never from async code, where it holds a thread of the
    /// cooperative pool (two on a two-core machine) for the whole check: there, call it with
    /// `await` and the async one runs.
    public func checkSignatures(_ operations: [SignedOperation]) throws -> CheckedBatch {
        if state.withLock({ $0.replica == nil && !$0.lent }) { try loadReplicaBlocking() }
        return CheckedBatch(operations: operations, valid: Self.verifySignatures(operations, skipping: knownToReplica(operations)))
    }

    /// Per operation, whether the replica accepted it already; nil without a replica in the slot.
    private func knownToReplica(_ operations: [SignedOperation]) -> [Bool]? {
        state.withLock { state in
            state.replica.map { replica in operations.map { replica.isKnown($0.id, in: $0.operation.conversation) } }
        }
    }

    /// `apply(received:wallMilliseconds:)` for operations checked beforehand.
    public func apply(received batch: CheckedBatch, wallMilliseconds: UInt64) async throws -> Applied {
        try await apply(received: batch, wallMilliseconds: wallMilliseconds, acknowledgingWith: nil)
    }

    /// Applies received operations checked beforehand; with `signer`, also the local user's
    /// delivered receipts for the new messages addressed to them, in the same transaction
    /// (`Store+Delivery`).
    ///
    /// `completeChanges` false: a caller that does not read `Applied.changes` (a node's
    /// storer) lets the commit skip reading back the messages it only updates (receipts) while
    /// no subscriber reads messages either (`changes(includingMessages:)`); their snapshots then
    /// come without parts.
    func apply(
        received batch: CheckedBatch, wallMilliseconds: UInt64, acknowledgingWith signer: LocalSigner?,
        completeChanges: Bool = true
    ) async throws -> Applied {
        let operations = batch.operations
        let valid = batch.valid
        let (horizon, overflow) = wallMilliseconds.addingReportingOverflow(futureTolerance)
        let latest = overflow ? UInt64.max : horizon

        var refused: [Refusal] = []
        var verified: [SignedOperation] = []
        verified.reserveCapacity(operations.count)
        for (index, signed) in operations.enumerated() {
            if !valid[index] {
                refused.append(Refusal(
                    operation: signed.id,
                    error: OperationError(.badSignature, "the signature of \(signed.id) does not verify with its author's key")))
            } else if signed.operation.timestamp.milliseconds > latest {
                refused.append(Refusal(
                    operation: signed.id,
                    error: OperationError(
                        .timestampInFuture,
                        "\(signed.id) is stamped \(signed.operation.timestamp.milliseconds - wallMilliseconds) ms ahead of this node's clock (the limit is \(futureTolerance) ms)"
                    )))
            } else {
                verified.append(signed)
            }
        }
        let accepted = verified
        let refusals = refused
        let localUser = self.localUser
        let (earliest, underflow) = wallMilliseconds.subtractingReportingOverflow(pendingLifetime)
        let pendingCutoff = HLCTimestamp(milliseconds: underflow ? 0 : earliest, counter: 0)
        let pendingLimit = self.pendingLimit
        return try await writeThroughReplica { db, lease in
            try Self.loadLogs(lease.replica.logsToLoad(for: accepted), into: &lease.replica, in: db)
            let current = CurrentSnapshots(db: db)
            try current.prefetch(Set(accepted.map(\.operation.conversation)))
            let (decided, changes) = lease.apply(accepted, current: current.read)
            try current.check()
            // No Materializer outlives its use: one holding the replica while the receipts
            // change it would make the replica copy the logs they touch. The log rows say
            // which operations the store held already (for the summaries).
            let held = try Materializer(db: db, replica: lease.replica, localUser: localUser).writeLog(batch: accepted, report: decided)
            // Waiting operations past the bounds go before anything counts them stored.
            var report = decided
            let drops = try Self.boundPending(
                report: &report, batch: accepted, held: held, cutoff: pendingCutoff, limit: pendingLimit, lease: &lease, in: db)
            var applied = Applied(report: report, refused: refusals + drops.refused, changes: changes)
            if let signer {
                try Self.acknowledgeDelivery(in: &applied, lease: &lease, db: db, localUser: localUser, signer: signer)
            }
            // The partial replica keeps no message parts: the change set gets them from the
            // batch or the log, once the receipts (if any) have changed the snapshots too.
            let withMessages = completeChanges || self.subscribers.wantMessages
            try Self.fillParts(of: &applied.changes, from: accepted, includingUpdated: withMessages, in: db)
            // The rows follow the replica the receipts (if any) left.
            try Materializer(db: db, replica: lease.replica, localUser: localUser).materialize(applied.changes)
            applied.changes = try Self.withDeliveryFailures(applied.changes, localUser: localUser, in: db)
            let waiting = try self.waitingMessages(among: applied.changes, in: db)
            // Received operations are published: their logs have left some node already.
            let new = Self.firstStored(accepted, report: report, held: held)
            var stored = try Self.recordStored(new + applied.acknowledgements, publishing: Set(new.map(\.operation.conversation)), in: db)
            if !drops.logs.isEmpty {
                let summarized = Set(stored.summaries.map(\.conversation))
                stored.summaries = (stored.summaries + (try Self.summaries(of: drops.logs.subtracting(summarized), in: db)))
                    .sorted { $0.conversation < $1.conversation }
            }
            let refusedNow = Set(drops.refused.map(\.operation))
            applied.record(received: new, of: accepted.count(where: { !refusedNow.contains($0.id) }), report: report, stored: stored)
            applied.droppedPending = drops.dropped
            applied.memberships = Self.membershipChanges(accepted, report: report, replica: lease.replica)
            stored.memberships = applied.memberships
            Self.trim(&lease.replica, keeping: Set(accepted.map(\.operation.conversation)), limit: cachedOperationLimit)
            return (applied, Publication(changes: applied.changes, waitingMessages: waiting, stored: stored, includesMessages: withMessages))
        }
    }

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
            for snapshot in try Store.conversations(ids: Array(ids), in: db) { fetched[snapshot.id] = snapshot }
        }

        func read(_ id: ConversationID) -> ConversationSnapshot? {
            if let snapshot = newer[id] { return snapshot }
            if let snapshot = fetched[id] { return snapshot }
            guard failure == nil else { return nil }
            do {
                return try Store.conversations(ids: [id], in: db).first
            } catch {
                failure = error
                return nil
            }
        }

        func check() throws {
            if let failure { throw failure }
        }
    }

    /// Whether each signature verifies, checked in parallel over the cores (Ed25519
    /// verification is the expensive part of accepting an operation), below the writer's
    /// priority (`SignatureCheckers`). `skipping` marks operations already known good,
    /// reported valid without a check. The calling task waits suspended, holding no thread.
    public static func verifySignatures(_ operations: [SignedOperation], skipping known: [Bool]? = nil) async -> [Bool] {
        await SignatureCheckers.shared.check(operations, skipping: known)
    }

    /// `verifySignatures(_:skipping:)` that blocks the calling thread until every signature is
    /// checked: never from async code.
    public static func verifySignatures(_ operations: [SignedOperation], skipping known: [Bool]? = nil) -> [Bool] {
        SignatureCheckers.shared.checkBlocking(operations, skipping: known)
    }

    // MARK: - Local writes

    /// Local operations and the outbox entries for the messages among them.
    public struct LocalBatch: Sendable {
        public var operations: [SignedOperation]
        public var outbox: [OutboxEntry]
        /// Logs to publish with this batch though it posts no message in them (a conversation
        /// created announced, SPEC.md §13.7); a log is published anyway by a message posted in it.
        public var publishing: Set<ConversationID>

        public init(operations: [SignedOperation], outbox: [OutboxEntry] = [], publishing: Set<ConversationID> = []) {
            self.operations = operations
            self.outbox = outbox
            self.publishing = publishing
        }
    }

    /// Writes operations the local user authored (already signed) and outbox entries for the
    /// messages to send, in one transaction. Every operation must be accepted by the merge
    /// rules; otherwise nothing is written and the call throws (`staleLocalWrite` when it was
    /// built against an older replica, `localOperationRefused` otherwise).
    public func commitLocal(_ operations: [SignedOperation], outbox: [OutboxEntry] = []) async throws -> Applied {
        try await commitLocal { _ in LocalBatch(operations: operations, outbox: outbox) }
    }

    /// Builds local operations from the current replica and writes them, on the writer queue:
    /// concurrent local writers cannot pick the same sequence number.
    ///
    /// The replica holds the logs the batch needs: when the first build read a log that was
    /// not in memory (`Replica.logsToLoad(forBuilding:)`), the logs are loaded and `build` is
    /// called again, so `build` may run more than once (only its last batch is written). Each
    /// round loads at least one more of the store's logs, so the rounds end.
    public func commitLocal(building build: @Sendable (Replica) throws -> LocalBatch) async throws -> Applied {
        try await commitLocal { replica in (try build(replica), ()) }.applied
    }

    /// `commitLocal(building:)` whose builder also returns a value of its own (what `LocalAuthor`
    /// found while building, such as an existing distinct conversation).
    func commitLocal<Extra: Sendable>(
        building build: @Sendable (Replica) throws -> (LocalBatch, Extra)
    ) async throws -> (applied: Applied, extra: Extra) {
        let localUser = self.localUser
        return try await writeThroughReplica { db, lease in
            var (batch, extra) = try build(lease.replica)
            while case let missing = lease.replica.logsToLoad(forBuilding: batch.operations), !missing.isEmpty {
                try Self.loadLogs(missing, into: &lease.replica, in: db)
                (batch, extra) = try build(lease.replica)
            }
            // What applying needs besides (a new conversation's log: operations may wait for it).
            try Self.loadLogs(lease.replica.logsToLoad(for: batch.operations), into: &lease.replica, in: db)
            try Self.checkLocal(batch, against: lease.replica, localUser: localUser)
            let current = CurrentSnapshots(db: db)
            let (report, changesWithoutParts) = lease.apply(batch.operations, current: current.read)
            var rowChanges = changesWithoutParts
            try Self.fillParts(of: &rowChanges, from: batch.operations, in: db)
            try current.check()
            if let (id, error) = report.rejected.first {
                throw StoreError(.localOperationRefused, "local operation \(id) was refused: \(error)")
            }
            if !report.pending.isEmpty {
                throw StoreError(.localOperationRefused, "local operation \(report.pending[0]) names causes this store does not have")
            }
            let materializer = Materializer(db: db, replica: lease.replica, localUser: localUser)
            try materializer.write(batch: batch.operations, report: report, changes: rowChanges)
            let inserted = try materializer.insert(outbox: batch.outbox)
            try noteUnsent(batch, in: db)
            let changes = try Self.withDeliveryFailures(rowChanges, localUser: localUser, in: db)
            let snapshots = Dictionary(changes.messages.compactMap { $0.snapshot.map { ($0.id, $0) } }, uniquingKeysWith: { _, last in last })
            var stored = try Self.recordStored(
                Self.firstStored(local: batch.operations, report: report), publishing: Self.publishing(batch), in: db)
            stored.memberships = Self.membershipChanges(batch.operations, report: report, replica: lease.replica)
            let publication = Publication(
                changes: changes,
                outbox: batch.outbox.map { OutboxChange(entry: $0, previousState: nil, message: snapshots[$0.message]) },
                waitingMessages: try waitingMessages(among: changes, inserted: inserted, in: db),
                stored: stored)
            Self.trim(&lease.replica, keeping: Set(batch.operations.map(\.operation.conversation)), limit: cachedOperationLimit)
            var applied = Applied(report: report, refused: [], changes: changes)
            applied.summaries = stored.summaries
            applied.storedOperations = stored.storedOperations
            applied.memberships = stored.memberships
            return ((applied, extra), publication)
        }
    }

    /// The logs a local batch needs that are not in memory: its operations' (with their merge
    /// groups) and those of the conversations its outbox entries name.
    private static func logsToLoad(for batch: LocalBatch, in replica: Replica) -> Set<ConversationID> {
        replica.logsToLoad(for: batch.operations).union(batch.outbox.map(\.conversation).filter { !replica.isLoaded($0) })
    }

    /// Refuses, before anything changes, a batch built against an older replica: its
    /// sequence numbers must continue each conversation's, in order. Applying an operation that
    /// reuses a sequence number would be an equivocation, which refuses the earlier operation too.
    private static func checkLocal(_ batch: LocalBatch, against replica: Replica, localUser: UserID) throws {
        var next: [ConversationID: UInt64] = [:]
        for signed in batch.operations {
            let op = signed.operation
            guard op.author == localUser else {
                throw StoreError(.localOperationRefused, "local operation \(signed.id) is authored by \(op.author), not the local user")
            }
            let expected = next[op.conversation] ?? replica.nextSequence(for: localUser, in: op.conversation)
            guard op.sequence == expected || replica.isKnown(signed.id, in: op.conversation) else {
                throw StoreError(
                    .staleLocalWrite,
                    "local operation \(signed.id) has sequence number \(op.sequence) in conversation \(op.conversation); the next is \(expected)")
            }
            next[op.conversation] = max(expected, op.sequence + 1)
        }
        let ids = Set(batch.operations.map(\.id))
        for entry in batch.outbox where !ids.contains(entry.message) && !replica.isKnown(entry.message, in: entry.conversation) {
            throw StoreError(.outboxWithoutMessage, "the outbox entry for \(entry.message) names no message written with it")
        }
    }
}

extension Data {
    /// The first bytes in hex, for messages.
    var hexPrefix: String { prefix(8).map { String(format: "%02x", $0) }.joined() }
}
