/// The removal rule of replication (SPEC.md §13.3, §13.7): a node does not send the node of a
/// user removed from a conversation anything posted after the removal. It is a rule about
/// sending, not about state: every node still stores and relays everything.
extension Replica {
    /// Whether `signed` must not be sent to the node of `user`.
    ///
    /// - A user never added in any log of the operation's merge group (the creation counts as
    ///   adding its participants) is a relay: nothing is withheld from them.
    /// - In a log that added `user`, an operation is withheld when its causal past holds an
    ///   add of `user` (they were a participant earlier) and `user` is a participant neither at
    ///   its causal point nor just after it (so the removal itself, and a re-add, still go).
    ///   When some of its causes are not held here, it is withheld: what is missing might be
    ///   the removal.
    /// - In a log that never added `user`, but another member of its merge group did, no
    ///   causal point spans both logs: it is withheld while `user` is not a participant of the
    ///   merged conversation.
    ///
    /// The logs of the operation's merge group must be loaded.
    public func withholds(_ signed: SignedOperation, from user: UserID) -> Bool {
        let op = signed.operation
        let group = members(ofGroupContaining: op.conversation)
        let logsOfGroup = (group.isEmpty ? [op.conversation] : group).compactMap { logs[$0] }
        guard logsOfGroup.contains(where: { $0.adds[user]?.isEmpty == false }) else { return false }
        guard let log = logs[op.conversation], let adds = log.adds[user], !adds.isEmpty else {
            return !isParticipant(user, of: op.conversation)
        }
        var past = VersionVector()
        for cause in op.causes {
            guard let record = log.records[cause] else { return true }
            past.formJoin(record.clock)
        }
        guard adds.contains(where: { past.includes(author: $0.author, sequence: $0.sequence) }) else { return false }
        if log.isParticipant(user, at: past) { return false }
        var after = past
        after.record(op.author, op.sequence)
        return !log.isParticipant(user, at: after)
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
