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
    private(set) var logs: [ConversationID: ConversationLog] = [:]
    private(set) var groups: [GroupKey: Set<ConversationID>] = [:]
    /// Operations waiting for causes, by identifier, and who waits on what.
    private var pending: [OperationID: SignedOperation] = [:]
    private var waitingOn: [OperationID: Set<OperationID>] = [:]
    /// Operations held per conversation whose creation has not arrived.
    public var pendingCount: Int { pending.count }

    public init(localUser: UserID?) { self.localUser = localUser }

    // MARK: - Applying

    /// What happened to each operation of a batch.
    public struct Report: Sendable {
        public var accepted: [OperationID] = []
        public var rejected: [(OperationID, OperationError)] = []
        public var pending: [OperationID] = []
        public var duplicates: [OperationID] = []
        /// Conversations (log identifiers) whose state changed.
        public var touched: Set<ConversationID> = []
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
        return report
    }

    private mutating func applyOne(_ signed: SignedOperation, report: inout Report, retry: inout [SignedOperation]) {
        let conversation = signed.operation.conversation
        // The log is changed in place: a copy taken out of `logs` would share its storage, and
        // the first change would copy the whole log (every operation, every message), once per
        // operation applied.
        let existed = logs[conversation] != nil
        let outcome = logs[conversation, default: ConversationLog(id: conversation)].apply(signed)
        switch outcome {
        case .accepted:
            report.accepted.append(signed.id)
            report.touched.insert(conversation)
            if let creation = logs[conversation]?.creation, creation.operation == signed.id, creation.distinct {
                groups[GroupKey(participants: creation.participants, generation: creation.generation), default: []]
                    .insert(conversation)
            }
            release(waitingFor: signed.id, into: &retry)
        case .duplicate:
            report.duplicates.append(signed.id)
        case .pending(let missing):
            if !existed { logs[conversation] = nil }  // as before: a pending operation creates no log
            if pending[signed.id] == nil {
                pending[signed.id] = signed
                for cause in missing { waitingOn[cause, default: []].insert(signed.id) }
                report.pending.append(signed.id)
            }
        case .rejected(let error):
            report.rejected.append((signed.id, error))
            // Everything waiting on a refused operation is refused in turn, when retried.
            release(waitingFor: signed.id, into: &retry)
        case .fork:
            // Rebuild the log from all its operations: the forked slots are now refused, and
            // so is everything after them, whatever order they arrived in.
            var rebuilt = logs[conversation]!.rebuiltWithoutForks()
            _ = rebuilt.apply(signed)
            logs[conversation] = rebuilt
            report.rejected.append(
                (signed.id, OperationError(.equivocation, "its author signed two operations for one sequence number")))
            report.touched.insert(conversation)
        }
    }

    private mutating func release(waitingFor id: OperationID, into retry: inout [SignedOperation]) {
        guard let waiters = waitingOn.removeValue(forKey: id) else { return }
        for waiter in waiters.sorted() {
            if let op = pending.removeValue(forKey: waiter) { retry.append(op) }
        }
    }

    // MARK: - Merge groups

    /// The canonical conversation for `id`: itself, or the least conversation of its merge
    /// group by (creation timestamp, identifier) while the group is distinct.
    public func canonicalID(for id: ConversationID) -> ConversationID {
        members(ofGroupContaining: id).first ?? id
    }

    /// The conversations shown as one: sorted canonical first. A non-distinct group is
    /// just the conversation itself... unless it was merged while distinct (§13.2).
    func members(ofGroupContaining id: ConversationID) -> [ConversationID] {
        guard let creation = logs[id]?.creation, creation.distinct,
            let group = groups[GroupKey(participants: creation.participants, generation: creation.generation)]
        else { return logs[id]?.creation == nil ? [] : [id] }
        return group.sorted { a, b in
            let ta = logs[a]!.creation!.timestamp
            let tb = logs[b]!.creation!.timestamp
            return ta != tb ? ta < tb : a < b
        }
    }

    /// Every canonical conversation.
    public var conversationIDs: [ConversationID] {
        Set(logs.keys.filter { logs[$0]?.creation != nil }.map(canonicalID(for:))).sorted()
    }

    /// The distinct conversation for exactly `participants` (the creator included), if any.
    public func distinctConversation(for participants: Set<UserID>) -> ConversationID? {
        let sorted = participants.sorted()
        let candidates = groups.filter { $0.key.participants == sorted }.sorted { $0.key.generation > $1.key.generation }
        for (_, members) in candidates {
            let canonical = canonicalID(for: members.first!)
            if conversation(canonical)?.isDistinct == true { return canonical }
        }
        return nil
    }

    /// The generation a new distinct conversation for `participants` belongs to: the newest
    /// known group's if it is still distinct, else one past it.
    public func generation(forDistinct participants: Set<UserID>) -> UInt32 {
        let sorted = participants.sorted()
        guard let newest = groups.keys.filter({ $0.participants == sorted }).map(\.generation).max() else { return 1 }
        let canonical = canonicalID(for: groups[GroupKey(participants: sorted, generation: newest)]!.first!)
        return conversation(canonical)?.isDistinct == true ? newest : newest + 1
    }

    // MARK: - Reading

    /// Causes for the next operation the local user writes in `id`: the heads of its log.
    public func heads(of id: ConversationID) -> [OperationID] { logs[id].map { Array($0.heads).sorted() } ?? [] }

    /// The local author's next sequence number in `id`.
    public func nextSequence(for author: UserID, in id: ConversationID) -> UInt64 {
        (logs[id]?.frontier[author] ?? 0) + 1
    }

    /// The latest timestamp among the heads of `id`, for the clock.
    public func latestTimestamp(in id: ConversationID) -> HLCTimestamp? {
        guard let log = logs[id] else { return nil }
        return log.heads.compactMap { log.accepted[$0]?.timestamp }.max()
    }

    public func isKnown(_ id: OperationID, in conversation: ConversationID) -> Bool {
        logs[conversation]?.accepted[id] != nil
    }

    /// Whether `user` is a participant of the conversation (group) now.
    public func isParticipant(_ user: UserID, of id: ConversationID) -> Bool {
        conversation(id)?.participants.contains(user) == true
    }
}
