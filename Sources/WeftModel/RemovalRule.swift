/// An add (a creation counts as adding its participants) or a removal of participants, as the
/// removal rule and the merge rules judge membership: who made it, where, and its causal past.
public struct MembershipEvent: Hashable, Sendable {
    public var author: UserID
    public var sequence: UInt64
    /// The event's clock: its causal past, itself included.
    public var clock: VersionVector

    public init(author: UserID, sequence: UInt64, clock: VersionVector) {
        self.author = author
        self.sequence = sequence
        self.clock = clock
    }

    /// Remove wins: a user is a participant in the past `clock` describes when some add of
    /// them in that past follows every removal of them in that past. A removal concurrent
    /// with an add therefore wins, and only an add made after seeing the removal brings the
    /// user back (SPEC.md §13.3).
    static func isParticipant(adds: [MembershipEvent], removes: [MembershipEvent], at clock: VersionVector) -> Bool {
        let inPast = { (event: MembershipEvent) in clock.includes(author: event.author, sequence: event.sequence) }
        let pastRemoves = removes.filter(inPast)
        return adds.contains { add in
            inPast(add) && pastRemoves.allSatisfy { add.clock.includes(author: $0.author, sequence: $0.sequence) }
        }
    }
}

/// What the removal rule knows of one log: the log's membership events and its merge group.
/// Replication is told these for every log of a merge group that holds a removal, and judges
/// what it sends on them alone (`RemovalRule`).
public struct LogMembership: Hashable, Sendable {
    public var log: ConversationID
    /// The logs of its merge group, itself included (§13.2).
    public var group: [ConversationID]
    public var adds: [UserID: [MembershipEvent]]
    public var removes: [UserID: [MembershipEvent]]
    /// The participants of the merged conversation now.
    public var participants: Set<UserID>

    public init(
        log: ConversationID, group: [ConversationID], adds: [UserID: [MembershipEvent]], removes: [UserID: [MembershipEvent]],
        participants: Set<UserID>
    ) {
        self.log = log
        self.group = group
        self.adds = adds
        self.removes = removes
        self.participants = participants
    }

    func isParticipant(_ user: UserID, at clock: VersionVector) -> Bool {
        MembershipEvent.isParticipant(adds: adds[user] ?? [], removes: removes[user] ?? [], at: clock)
    }
}

/// The removal rule of replication (SPEC.md §13.3, §13.7): a node does not send the node of a
/// user removed from a conversation anything posted after the removal. It is a rule about
/// sending, not about state: every node still stores and relays everything.
///
/// A value judged from facts it is told, with no store behind it: the membership of every log
/// whose merge group holds a removal (only those can withhold anything: without a removal,
/// every user a group ever added is a participant at every point after the add), and, for an
/// operation to judge, its causal past.
public struct RemovalRule: Hashable, Sendable {
    /// By log: the logs of merge groups that hold a removal.
    public private(set) var logs: [ConversationID: LogMembership] = [:]

    public init(_ facts: [LogMembership] = []) { update(facts) }

    public var isEmpty: Bool { logs.isEmpty }

    /// Takes newer facts of these logs (each replaces what was known of its log).
    public mutating func update(_ facts: [LogMembership]) {
        for fact in facts { logs[fact.log] = fact }
    }

    /// Whether the rule can withhold any operation of `log` from `user`: some log of its
    /// group added `user` and some removed them. Cheap: the question asked for every push.
    public func concerns(_ user: UserID, in log: ConversationID) -> Bool {
        guard let facts = logs[log] else { return false }
        let group = facts.group.compactMap { logs[$0] }
        return group.contains { $0.adds[user]?.isEmpty == false } && group.contains { $0.removes[user]?.isEmpty == false }
    }

    /// The part of the rule about `user`'s node: the logs of the groups that concern `user`;
    /// nil when nothing can be withheld from them.
    public func restricted(to user: UserID) -> Withholding? {
        let facts = logs.values.filter { concerns(user, in: $0.log) }
        return facts.isEmpty ? nil : Withholding(user: user, rule: RemovalRule(facts))
    }

    /// Whether `signed` must not be sent to the node of `user`, given `past`, the join of its
    /// causes' clocks (nil when some cause is not held).
    ///
    /// - A user never added in any log of the operation's merge group is a relay: nothing is
    ///   withheld from them.
    /// - In a log that added `user`, an operation is withheld when its causal past holds an
    ///   add of `user` (they were a participant earlier) and `user` is a participant neither
    ///   at its causal point nor just after it (so the removal itself, and a re-add, still
    ///   go). Without its past (a cause not held) it is withheld: what is missing might be
    ///   the removal.
    /// - In a log that never added `user`, but another member of its merge group did, no
    ///   causal point spans both logs: it is withheld while `user` is not a participant of the
    ///   merged conversation.
    public func withholds(_ signed: SignedOperation, past: VersionVector?, from user: UserID) -> Bool {
        let op = signed.operation
        guard let log = logs[op.conversation] else { return false }
        guard log.group.contains(where: { logs[$0]?.adds[user]?.isEmpty == false }) else { return false }
        guard let adds = log.adds[user], !adds.isEmpty else { return !log.participants.contains(user) }
        guard let past else { return true }
        guard adds.contains(where: { past.includes(author: $0.author, sequence: $0.sequence) }) else { return false }
        if log.isParticipant(user, at: past) { return false }
        var after = past
        after.record(op.author, op.sequence)
        return !log.isParticipant(user, at: after)
    }
}

/// The removal rule as it applies to one user's node: what replication sends that node from
/// its store is judged by it (`RemovalRule.restricted(to:)`).
public struct Withholding: Hashable, Sendable {
    public let user: UserID
    public let rule: RemovalRule

    /// The logs whose operations it may withhold: only those need their causal past.
    public var logs: Set<ConversationID> { Set(rule.logs.keys) }

    /// Whether `signed` must not go to `user`'s node; `past` as in `RemovalRule.withholds`.
    public func withholds(_ signed: SignedOperation, past: VersionVector?) -> Bool {
        rule.withholds(signed, past: past, from: user)
    }

    /// `operations` less those withheld, given their causal pasts (an operation of a judged
    /// log absent from `pasts` is judged without its past: withheld).
    public func filter(_ operations: [SignedOperation], pasts: [OperationID: VersionVector]) -> [SignedOperation] {
        operations.filter { !withholds($0, past: pasts[$0.id]) }
    }
}
