/// The facts the removal rule (`RemovalRule`, SPEC.md §13.3) judges on, from the logs held.
extension Replica {
    /// Whether `signed` must not be sent to the node of `user` (`RemovalRule.withholds`). The
    /// logs of the operation's merge group must be loaded.
    ///
    /// An operation with a cause not held is withheld from every user its log added, removal
    /// held or not: the missing past may hold one. (Replication never sends such an
    /// operation anyway: it waits, pending, §14.8; so the rule it is told covers only merge
    /// groups with a removal held.)
    public func withholds(_ signed: SignedOperation, from user: UserID) -> Bool {
        let past = causalPast(of: signed)
        if past == nil, logs[signed.operation.conversation]?.adds[user]?.isEmpty == false { return true }
        return RemovalRule(membershipFacts(forGroupsOf: [signed.operation.conversation])).withholds(signed, past: past, from: user)
    }

    /// The join of the clocks of the operation's causes: its causal past. Nil when a cause is
    /// not held in its log (or the log is not loaded).
    public func causalPast(of signed: SignedOperation) -> VersionVector? {
        guard let log = logs[signed.operation.conversation] else { return nil }
        var past = VersionVector()
        for cause in signed.operation.causes {
            guard let record = log.records[cause] else { return nil }
            past.formJoin(record.clock)
        }
        return past
    }

    /// What the removal rule is told of the merge groups of `ids`: every log of each group
    /// that holds a removal of participants; nothing of a group without one. The groups'
    /// logs must be loaded.
    public func membershipFacts(forGroupsOf ids: some Sequence<ConversationID>) -> [LogMembership] {
        var facts: [LogMembership] = []
        var seen: Set<ConversationID> = []
        for id in ids where !seen.contains(id) {
            let members = members(ofGroupContaining: id)
            let group = members.isEmpty ? [id] : members
            seen.formUnion(group)
            let logsOfGroup = group.compactMap { logs[$0] }
            guard logsOfGroup.contains(where: { !$0.removes.isEmpty }) else { continue }
            let participants = Set(conversation(id)?.participants ?? [])
            for log in logsOfGroup {
                facts.append(
                    LogMembership(log: log.id, group: group, adds: log.adds, removes: log.removes, participants: participants))
            }
        }
        return facts
    }
}

extension Replica {
    /// The logs not in memory that judging operations of `ids` needs: each log and the
    /// members of its merge group.
    public func logsToLoad(forLogs ids: Set<ConversationID>) -> Set<ConversationID> {
        var needed = ids
        for id in ids { needed.formUnion(members(ofGroupContaining: id)) }
        return needed.filter { !isLoaded($0) }
    }
}

extension Replica {
    /// Whether some log of the merge group of `id` ever added `user` (the creation counts as
    /// adding its participants): false for a log the node only relays. The group's logs must
    /// be loaded.
    public func everAdded(_ user: UserID, inGroupOf id: ConversationID) -> Bool {
        let group = members(ofGroupContaining: id)
        return (group.isEmpty ? [id] : group).contains { logs[$0]?.adds[user]?.isEmpty == false }
    }

    /// Whether the node of `localUser` shows the merge group of `id` (SPEC.md §14.9): its user
    /// is or was a participant, added in some log of the group. A node only relays the others.
    /// Without a local user, every group. The group's logs must be loaded.
    public func shows(_ id: ConversationID) -> Bool {
        guard let localUser else { return true }
        return everAdded(localUser, inGroupOf: id)
    }
}
