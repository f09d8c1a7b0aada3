/// The replicated state of every conversation a node holds: a pure function of the set of
/// operations it was given (SPEC.md §13). Sans-I/O: operations in, outcomes and changes out.
///
/// Operations whose causes have not arrived wait in `pending` and are applied as soon as their
/// causes are; a duplicate changes nothing.
public struct Replica: Sendable {
    /// A merge group's key: distinct conversations created for the same participants in the
    /// same generation merge (§13.2).
    struct GroupKey: Hashable, Sendable {
        var participants: [UserID]
        var generation: UInt32
    }

    /// The user whose unread counts and receipts the snapshots describe.
    public let localUser: UserID?
    /// Whether only some logs are in memory (see `Replica+Loading.swift`); a complete replica
    /// holds every log it was given operations for. A partial replica keeps no message bodies
    /// either: its message snapshots carry no parts (its store reads them from its tables).
    public let isPartial: Bool
    /// The conversation logs in memory: all of them, or for a partial replica those loaded.
    var logs: [ConversationID: ConversationLog] = [:]
    /// Every accepted creation, by conversation: what merge groups and lookups need, without
    /// reaching into (and copying) the logs.
    private(set) var creations: [ConversationID: ConversationLog.Creation] = [:]
    /// Each group's members, sorted by (creation timestamp, identifier): canonical first.
    private(set) var groups: [GroupKey: [ConversationID]] = [:]
    /// Operations waiting for causes, by identifier, each with the causes it waits for.
    var pending: [OperationID: PendingOperation] = [:]
    /// For each missing cause, the pending operations waiting for it: exactly the causes the
    /// entries of `pending` list, so taking one operation out touches only its own entries.
    var waitingOn: [OperationID: Set<OperationID>] = [:]
    /// The pending operations of each log (conversation identifier), for dropping a log's.
    var pendingByConversation: [ConversationID: Set<OperationID>] = [:]
    /// Entries of the three pending indexes added or removed, for tests: keeping them costs
    /// work in proportion to what enters and leaves them, never to what waits in them.
    var pendingIndexWork = 0
    /// Operations waiting for causes, in every log.
    public var pendingCount: Int { pending.count }

    /// An operation waiting for causes, and the causes it still lacks (as of its last try).
    struct PendingOperation: Sendable {
        var signed: SignedOperation
        var missing: [OperationID]
    }

    /// A complete replica, empty.
    public init(localUser: UserID?) {
        self.localUser = localUser
        self.isPartial = false
    }

    /// A partial replica knowing the conversations these creations (accepted earlier) made,
    /// with no log in memory yet: each log must be loaded (`load(_:operations:)`) before
    /// anything reads or writes it.
    public init(localUser: UserID?, creations: some Sequence<SignedOperation>) {
        self.localUser = localUser
        self.isPartial = true
        for signed in creations {
            guard let creation = ConversationLog.creation(of: signed) else { continue }
            let id = signed.operation.conversation
            guard self.creations[id] == nil else { continue }
            self.creations[id] = creation
            if creation.distinct { join(id, created: creation) }
        }
    }

    // MARK: - Applying

    /// What happened to each operation of a batch.
    public struct Report: Sendable {
        public var accepted: [OperationID] = []
        public var rejected: [(OperationID, OperationError)] = []
        public var pending: [OperationID] = []
        /// For each operation in `pending`, the causes it waits for that this replica does not
        /// hold (what a node asks its peer for, SPEC.md §14.8).
        public var missingCauses: [OperationID: [OperationID]] = [:]
        public var duplicates: [OperationID] = []
        /// Operations accepted earlier (in this batch or before) and refused now, because their
        /// causal past reaches a slot their author was found to have used twice (SPEC.md §13.1).
        /// They are listed in `rejected` too; whoever keeps the accepted set must drop them.
        public var revoked: [OperationID] = []
        /// Conversations (log identifiers) whose state changed.
        public var touched: Set<ConversationID> = []

        public init() {}
    }

    /// Applies operations whose signatures the caller has verified (see `SignedOperation.hasValidSignature`).
    public mutating func apply(verified operations: [SignedOperation]) -> Report {
        var report = Report()
        var queue = operations[...]
        var retry: [SignedOperation] = []
        while let next = queue.popFirst() ?? (retry.isEmpty ? nil : retry.removeFirst()) {
            applyOne(next, report: &report, retry: &retry)
        }
        // An operation that was pending and is now decided is not reported as pending.
        let decided = Set(report.accepted).union(report.rejected.map(\.0))
        report.pending.removeAll { decided.contains($0) || pending[$0] == nil }
        let stillPending = Set(report.pending)
        report.missingCauses = report.missingCauses.filter { stillPending.contains($0.key) }.mapValues { causes in
            causes.filter { waitingOn[$0] != nil }
        }.filter { !$0.value.isEmpty }
        if !report.revoked.isEmpty {
            // Accepted, then revoked in the same batch (or the other way round): report the end.
            let revoked = Set(report.revoked)
            let accepted = Set(report.accepted)
            report.accepted.removeAll { revoked.contains($0) && !isAccepted($0) }
            report.revoked.removeAll { accepted.contains($0) && isAccepted($0) }
            report.rejected.removeAll { isAccepted($0.0) }
        }
        return report
    }

    private mutating func applyOne(_ signed: SignedOperation, report: inout Report, retry: inout [SignedOperation]) {
        let conversation = signed.operation.conversation
        assert(isLoaded(conversation), "conversation \(conversation) is applied to before its log was loaded")
        // In place: a copy of the log would copy its tables on every accepted operation.
        let outcome = logs[conversation, default: ConversationLog(id: conversation, keepsBodies: !isPartial)].apply(signed)
        switch outcome {
        case .accepted:
            report.accepted.append(signed.id)
            report.touched.insert(conversation)
            if creations[conversation] == nil, let creation = logs[conversation]?.creation {
                creations[conversation] = creation
                if creation.distinct { join(conversation, created: creation) }
            }
            release(waitingFor: signed.id, into: &retry)
        case .duplicate:
            report.duplicates.append(signed.id)
        case .pending(let missing):
            if pending[signed.id] == nil {
                hold(signed, missing: missing)
                report.pending.append(signed.id)
                report.missingCauses[signed.id] = missing
            }
        case .rejected(let error):
            report.rejected.append((signed.id, error))
            // Everything waiting on a refused operation is refused in turn, when retried.
            release(waitingFor: signed.id, into: &retry)
        case .reforked(let accepted, let revoked):
            // The forked slots changed: operations whose past reaches a forked slot are refused,
            // including some accepted before, whatever order they arrived in; and an operation
            // tainted only by a slot that is no longer counted as forked is accepted.
            report.accepted += accepted
            if !accepted.contains(signed.id) {
                report.rejected.append((signed.id, ConversationLog.equivocationError(signed.operation.author, signed.operation.sequence)))
            }
            for id in revoked {
                report.rejected.append((id, ConversationLog.equivocationError(signed.operation.author, signed.operation.sequence)))
            }
            report.revoked += revoked
            report.touched.insert(conversation)
            release(waitingFor: signed.id, into: &retry)
        }
    }

    private mutating func release(waitingFor id: OperationID, into retry: inout [SignedOperation]) {
        guard let waiters = waitingOn.removeValue(forKey: id) else { return }
        pendingIndexWork += 1
        for waiter in waiters.sorted() {
            if let op = unhold(waiter) { retry.append(op) }
        }
    }

    // MARK: - Pending operations

    /// Holds an operation until `missing` arrive.
    private mutating func hold(_ signed: SignedOperation, missing: [OperationID]) {
        pending[signed.id] = PendingOperation(signed: signed, missing: missing)
        for cause in missing { waitingOn[cause, default: []].insert(signed.id) }
        pendingByConversation[signed.operation.conversation, default: []].insert(signed.id)
        pendingIndexWork += 2 + missing.count
    }

    /// Takes a pending operation out of every index, touching only the entries that name it
    /// (those of its missing causes, and its log's); nil if it was not pending.
    mutating func unhold(_ id: OperationID) -> SignedOperation? {
        guard let held = pending.removeValue(forKey: id) else { return nil }
        for cause in held.missing {
            // In place: a copy of the set per waiter would cost what waits on the cause.
            if waitingOn[cause]?.remove(id) != nil, waitingOn[cause]?.isEmpty == true { waitingOn[cause] = nil }
        }
        let conversation = held.signed.operation.conversation
        if pendingByConversation[conversation]?.remove(id) != nil, pendingByConversation[conversation]?.isEmpty == true {
            pendingByConversation[conversation] = nil
        }
        pendingIndexWork += 2 + held.missing.count
        return held.signed
    }

    /// How many operations wait for causes in the log of `conversation` (a log held in memory).
    public func pendingCount(in conversation: ConversationID) -> Int { pendingByConversation[conversation]?.count ?? 0 }

    /// The pending operation `id`, if this replica holds it.
    public func pendingOperation(_ id: OperationID) -> SignedOperation? { pending[id]?.signed }

    /// Forgets pending operations, as if they had never arrived (a store deleting them, SPEC.md
    /// §11.1): what waits on them waits on; one arriving again is taken again. Identifiers not
    /// pending are ignored. Returns how many were dropped. Costs what is dropped, not what waits.
    @discardableResult
    public mutating func dropPending(_ ids: some Sequence<OperationID>) -> Int {
        var dropped = 0
        for id in ids where unhold(id) != nil { dropped += 1 }
        return dropped
    }

    // MARK: - Merge groups

    /// The canonical conversation for `id`: itself, or the least conversation of its merge
    /// group by (creation timestamp, identifier).
    public func canonicalID(for id: ConversationID) -> ConversationID {
        members(ofGroupContaining: id).first ?? id
    }

    /// Adds a distinct conversation to its merge group, in canonical order.
    mutating func join(_ id: ConversationID, created creation: ConversationLog.Creation) {
        let key = GroupKey(participants: creation.participants, generation: creation.generation)
        var members = groups[key] ?? []
        let index = members.firstIndex { other in
            guard let timestamp = creations[other]?.timestamp else { return false }
            return timestamp != creation.timestamp ? creation.timestamp < timestamp : id < other
        } ?? members.endIndex
        members.insert(id, at: index)
        groups[key] = members
    }

    /// The conversations shown as one, canonical first: the merge group of a conversation
    /// created distinct (§13.2), even after it stopped being distinct; else the conversation
    /// alone; empty for an unknown conversation.
    func members(ofGroupContaining id: ConversationID) -> [ConversationID] {
        guard let creation = creations[id] else { return [] }
        guard creation.distinct, let group = groups[GroupKey(participants: creation.participants, generation: creation.generation)]
        else { return [id] }
        return group
    }

    /// Every canonical conversation.
    public var conversationIDs: [ConversationID] {
        var canonical: Set<ConversationID> = []
        for id in creations.keys { canonical.insert(canonicalID(for: id)) }
        return canonical.sorted()
    }

    /// The newest merge group for exactly `participants`: its generation and canonical conversation.
    private func newestGroup(for participants: Set<UserID>) -> (generation: UInt32, canonical: ConversationID)? {
        let sorted = participants.sorted()
        guard let newest = groups.keys.filter({ $0.participants == sorted }).map(\.generation).max(),
            let canonical = groups[GroupKey(participants: sorted, generation: newest)]?.first
        else { return nil }
        return (newest, canonical)
    }

    /// The distinct conversation for exactly `participants` (the creator included), if any: the
    /// canonical conversation of the newest group for that set, while it is distinct. Agrees with
    /// `generation(forDistinct:)`: a creation joins this conversation's group.
    public func distinctConversation(for participants: Set<UserID>) -> ConversationID? {
        guard let newest = newestGroup(for: participants), conversation(newest.canonical)?.isDistinct == true else { return nil }
        return newest.canonical
    }

    /// The generation a new distinct conversation for `participants` belongs to: the newest
    /// known group's if it is still distinct, else one past it (§13.2). The last generation
    /// has no successor: past it, creations join that group.
    public func generation(forDistinct participants: Set<UserID>) -> UInt32 {
        guard let newest = newestGroup(for: participants) else { return 1 }
        if conversation(newest.canonical)?.isDistinct == true || newest.generation == .max { return newest.generation }
        return newest.generation + 1
    }

    // MARK: - Reading

    /// Causes for the next operation the local user writes in `id`: the heads of its log.
    public func heads(of id: ConversationID) -> [OperationID] { logs[id].map { Array($0.heads).sorted() } ?? [] }

    /// The causes `author`'s next operation in `id` names: every head of the log, or, in a
    /// log of more than `Operation.maxWrittenCauses` heads (concurrent posts by that many
    /// participants, which a hostile member can arrange), a head that follows the author's
    /// previous operation (the chain rule, §13.1) and the most recent others, up to that
    /// many: an operation must fit its encoding (a u16 count) and `Operation.maxByteCount`.
    public func causes(forNextOf author: UserID, in id: ConversationID) -> [OperationID] {
        guard let log = logs[id] else { return [] }
        guard log.heads.count > Operation.maxWrittenCauses else { return Array(log.heads).sorted() }
        let own = log.frontier[author]
        var chosen: Set<OperationID> = []
        if own > 0, let follower = log.heads.first(where: { (log.records[$0]?.clock[author] ?? 0) >= own }) { chosen.insert(follower) }
        let newest = log.heads.sorted { a, b in
            let (ta, tb) = (log.records[a]?.timestamp.rawValue ?? 0, log.records[b]?.timestamp.rawValue ?? 0)
            return ta != tb ? ta > tb : a < b
        }
        for head in newest where chosen.count < Operation.maxWrittenCauses { chosen.insert(head) }
        return chosen.sorted()
    }

    /// The local author's next sequence number in `id`.
    public func nextSequence(for author: UserID, in id: ConversationID) -> UInt64 {
        (logs[id]?.frontier[author] ?? 0) + 1
    }

    /// The latest timestamp among the heads of `id`, for the clock.
    public func latestTimestamp(in id: ConversationID) -> HLCTimestamp? {
        guard let log = logs[id] else { return nil }
        return log.heads.compactMap { log.records[$0]?.timestamp }.max()
    }

    public func isKnown(_ id: OperationID, in conversation: ConversationID) -> Bool {
        logs[conversation]?.isAccepted(id) == true
    }

    /// Whether an operation is accepted, in whichever log.
    private func isAccepted(_ id: OperationID) -> Bool { logs.values.contains { $0.isAccepted(id) } }

    /// Every operation accepted, in every log (for diagnostics and tests).
    var acceptedOperations: Set<OperationID> { logs.values.reduce(into: []) { $0.formUnion($1.acceptedIDs) } }

    /// Every operation refused, in every log (for diagnostics and tests).
    var rejectedOperations: Set<OperationID> { logs.values.reduce(into: []) { $0.formUnion($1.refusedIDs) } }

    /// Whether `user` is a participant of the conversation (group) now.
    public func isParticipant(_ user: UserID, of id: ConversationID) -> Bool {
        conversation(id)?.participants.contains(user) == true
    }
}
