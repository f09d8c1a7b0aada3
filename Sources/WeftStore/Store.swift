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
public final class Store: Sendable {
    /// The database file inside the store's directory.
    public static let fileName = "weft.sqlite"
    /// How far ahead of the wall clock a peer's timestamp may be (SPEC.md §13.1: 60 s).
    public static let defaultFutureTolerance: UInt64 = 60_000

    /// The user whose unread flags and counts the store keeps.
    public let localUser: UserID
    /// Milliseconds a received operation's timestamp may be ahead of the wall clock.
    public let futureTolerance: UInt64
    let database: any DatabaseWriter
    /// The partial replica, nil until a write needs it. Held across each write transaction, so
    /// the replica and the tables change together; readers do not take it.
    private let state = Mutex<Replica?>(nil)

    /// Opens (or creates) a store.
    /// - Parameters:
    ///   - directory: where `weft.sqlite` lives (created if missing); nil keeps the store in
    ///     memory, for tests.
    ///   - localUser: the user this node belongs to; a store on disk refuses another.
    public init(directory: URL?, localUser: UserID, futureTolerance: UInt64 = Store.defaultFutureTolerance) throws {
        self.localUser = localUser
        self.futureTolerance = futureTolerance
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
    }

    // MARK: - The replica

    /// The complete replica, rebuilt from the whole log on every call: every stored operation
    /// (accepted, pending and rejected) replayed in applied order. Rejected ones are refused
    /// again, pending ones wait again, so the result is the replica that wrote the log. It costs
    /// the whole log in time and memory, so it is for tests and tools on small stores; writers
    /// use `commitLocal(building:)`, which builds against the store's own (partial) replica.
    public var replica: Replica {
        get throws { try Self.completeReplica(from: database, localUser: localUser) }
    }

    /// The distinct conversation for exactly `participants` (the local user included), if any
    /// (`Replica.distinctConversation(for:)`), loading only the logs of the groups for that set.
    public func distinctConversation(for participants: Set<UserID>) throws -> ConversationID? {
        try state.withLock { slot in
            var replica = try Self.loaded(&slot, from: database, localUser: localUser, for: [])
            try Self.loadLogs(replica.logsToLoad(forDistinct: participants), into: &replica, from: database)
            slot = replica
            return replica.distinctConversation(for: participants)
        }
    }

    /// Drops the replica from memory: the next write builds it again (after a bulk write that
    /// went around it).
    func forgetReplica() { state.withLock { $0 = nil } }

    /// The partial replica with the logs that applying or building `operations` needs: built
    /// from the index of creations if it is not in memory, then the missing logs loaded from
    /// the operation table (see `Store+Loading.swift`).
    private static func loaded(
        _ slot: inout Replica?, from database: any DatabaseWriter, localUser: UserID, for operations: [SignedOperation]
    ) throws -> Replica {
        var replica = try slot ?? indexedReplica(from: database, localUser: localUser)
        try loadLogs(replica.logsToLoad(for: operations), into: &replica, from: database)
        slot = replica
        return replica
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
        /// Operations refused on receipt (signatures, clocks); always empty for local writes.
        public var refused: [Refusal]
        /// What readers see change.
        public var changes: ChangeSet
    }

    /// Applies operations received from peers: verifies their signatures in parallel over the
    /// cores, refuses bad signatures and timestamps more than `futureTolerance` ahead of
    /// `wallMilliseconds`, applies the rest to the replica, and writes in one transaction the
    /// operation log (accepted, pending, rejected with its reason) and the rows of every
    /// conversation and message that changed.
    public func apply(received operations: [SignedOperation], wallMilliseconds: UInt64) throws -> Applied {
        // Operations the replica already accepted need no second check (a peer resending).
        let known = try state.withLock { slot in
            let replica = try Self.loaded(&slot, from: database, localUser: localUser, for: operations)
            return operations.map { replica.isKnown($0.id, in: $0.operation.conversation) }
        }
        let (horizon, overflow) = wallMilliseconds.addingReportingOverflow(futureTolerance)
        let latest = overflow ? UInt64.max : horizon
        let valid = Self.verifySignatures(operations, skipping: known)

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
        return try state.withLock { slot in
            var replica = try Self.loaded(&slot, from: database, localUser: localUser, for: verified)
            slot = nil  // until the transaction commits: a failed write leaves it to be rebuilt
            let (report, changesWithoutParts) = replica.applyReportingChangesIncrementally(verified: verified, current: currentSnapshot)
            let changes = try database.write { db in
                let changes = try Self.withParts(changesWithoutParts, from: verified, in: db)
                try Materializer(db: db, replica: replica, localUser: localUser)
                    .write(batch: verified, report: report, changes: changes)
                return changes
            }
            Self.trim(&replica, keeping: Set(verified.map(\.operation.conversation)))
            slot = replica
            return Applied(report: report, refused: refused, changes: changes)
        }
    }

    /// A canonical conversation as its row says, which is what the replica says between writes
    /// (the change set starts from it instead of recomputing it from every message).
    private func currentSnapshot(_ id: ConversationID) -> ConversationSnapshot? {
        try? database.read { db in try Self.conversations(ids: [id], in: db).first }
    }

    /// Whether each signature verifies, checked in parallel over the cores (Ed25519
    /// verification is the expensive part of accepting an operation). `skipping` marks
    /// operations already known good, reported valid without a check.
    public static func verifySignatures(_ operations: [SignedOperation], skipping known: [Bool]? = nil) -> [Bool] {
        let count = operations.count
        guard count > 0 else { return [] }
        let chunkSize = 32
        let chunks = (count + chunkSize - 1) / chunkSize
        return [Bool](unsafeUninitializedCapacity: count) { buffer, initialized in
            let results = VerificationResults(buffer: buffer)
            DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
                for index in (chunk * chunkSize)..<min(count, (chunk + 1) * chunkSize) {
                    results.set(index, known?[index] == true || operations[index].hasValidSignature)
                }
            }
            initialized = count
        }
    }

    /// Where the verifying threads write their answers.
    // @unchecked Sendable: each index is written by exactly one iteration of concurrentPerform,
    // and the buffer is read only after concurrentPerform returns (which orders the writes).
    private struct VerificationResults: @unchecked Sendable {
        let buffer: UnsafeMutableBufferPointer<Bool>
        func set(_ index: Int, _ value: Bool) { (buffer.baseAddress! + index).initialize(to: value) }
    }

    // MARK: - Local writes

    /// Local operations and the outbox entries for the messages among them.
    public struct LocalBatch: Sendable {
        public var operations: [SignedOperation]
        public var outbox: [OutboxEntry]

        public init(operations: [SignedOperation], outbox: [OutboxEntry] = []) {
            self.operations = operations
            self.outbox = outbox
        }
    }

    /// Writes operations the local user authored (already signed) and outbox entries for the
    /// messages to send, in one transaction. Every operation must be accepted by the merge
    /// rules; otherwise nothing is written and the call throws (`staleLocalWrite` when it was
    /// built against an older replica, `localOperationRefused` otherwise).
    public func commitLocal(_ operations: [SignedOperation], outbox: [OutboxEntry] = []) throws -> Applied {
        try commitLocal { _ in LocalBatch(operations: operations, outbox: outbox) }
    }

    /// Builds local operations from the current replica and writes them, under the store's
    /// lock: concurrent local writers cannot pick the same sequence number.
    ///
    /// The replica holds the logs the batch needs: when the first build names a conversation
    /// whose log was not in memory, the log is loaded and `build` is called again, so `build`
    /// may run more than once (only its last batch is written).
    public func commitLocal(building build: (Replica) throws -> LocalBatch) throws -> Applied {
        try state.withLock { slot in
            var replica = try Self.loaded(&slot, from: database, localUser: localUser, for: [])
            var batch = try build(replica)
            while case let missing = Self.logsToLoad(for: batch, in: replica), !missing.isEmpty {
                try Self.loadLogs(missing, into: &replica, from: database)
                slot = replica
                batch = try build(replica)
            }
            try checkLocal(batch, against: replica)
            slot = nil  // until the transaction commits
            let (report, changesWithoutParts) = replica.applyReportingChangesIncrementally(
                verified: batch.operations, current: currentSnapshot)
            if let (id, error) = report.rejected.first {
                throw StoreError(.localOperationRefused, "local operation \(id) was refused: \(error)")
            }
            if !report.pending.isEmpty {
                throw StoreError(.localOperationRefused, "local operation \(report.pending[0]) names causes this store does not have")
            }
            let changes = try database.write { db in
                let changes = try Self.withParts(changesWithoutParts, from: batch.operations, in: db)
                let materializer = Materializer(db: db, replica: replica, localUser: localUser)
                try materializer.write(batch: batch.operations, report: report, changes: changes)
                try materializer.insert(outbox: batch.outbox)
                return changes
            }
            Self.trim(&replica, keeping: Set(batch.operations.map(\.operation.conversation)))
            slot = replica
            return Applied(report: report, refused: [], changes: changes)
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
    private func checkLocal(_ batch: LocalBatch, against replica: Replica) throws {
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
