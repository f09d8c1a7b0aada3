/// A partial replica: the logs a store is writing to, not every log it holds.
///
/// The merge rules judge an operation only by its own conversation's log (its causes, slots,
/// membership and messages are all in that log), and the state a reader sees of a conversation
/// is built from the logs of its merge group. So a store can keep in memory only the whole-store
/// index of creations (merge groups, canonical conversations, `conversationIDs`) and the logs
/// of the groups it writes to, loading each from its stored operations when a write needs it
/// and dropping it again later. Loading replays the log's operations in the order they were
/// decided, which rebuilds exactly the log that decided them (pending ones wait again, refused
/// ones are refused again). The model does no I/O: the store reads the operations and hands
/// them over.
///
/// A partial replica keeps what the merge rules need (records of authors, sequence numbers,
/// timestamps and clocks; membership events; metadata winners; receipts and watermarks; heads)
/// but no message parts: its message snapshots have `parts` empty, and its store fills them in
/// from the batch or from the operation table.
extension Replica {
    /// Whether the log of `id` is in memory (always true for a complete replica).
    public func isLoaded(_ id: ConversationID) -> Bool { !isPartial || logs[id] != nil }

    /// The conversations whose logs are in memory.
    public var loadedConversations: Set<ConversationID> { Set(logs.keys) }

    /// Operations the loaded logs hold (well-formed, refused and waiting): what their memory grows with.
    public var loadedOperationCount: Int { logs.values.reduce(pending.count) { $0 + $1.operationCount } }

    /// The logs not in memory that reading or applying `operations` needs: each operation's
    /// conversation and the members of its merge group, and for a distinct creation every
    /// group for the same participants (what `generation(forDistinct:)` and
    /// `distinctConversation(for:)` read). Loading them can reveal nothing more: the merge
    /// groups come from the index of creations, which is whole.
    public func logsToLoad(for operations: some Sequence<SignedOperation>) -> Set<ConversationID> {
        var needed: Set<ConversationID> = []
        for signed in operations {
            let op = signed.operation
            needed.insert(op.conversation)
            needed.formUnion(members(ofGroupContaining: op.conversation))
            if case .createConversation(let participants, true, _, _) = op.body {
                needed.formUnion(logsToLoad(forDistinct: Set(participants)))
            }
        }
        return needed.filter { !isLoaded($0) }
    }

    /// The logs not in memory that an `Author` reads to build `operations`: the conversations
    /// written to (heads, sequence numbers, clocks) with their merge groups, and for a distinct
    /// creation every group for its participants. Unlike `logsToLoad(for:)`, not a creation's
    /// own conversation: nothing built reads it, and each build names a new one.
    public func logsToLoad(forBuilding operations: some Sequence<SignedOperation>) -> Set<ConversationID> {
        var needed: Set<ConversationID> = []
        for signed in operations {
            let op = signed.operation
            if case .createConversation(let participants, let distinct, _, _) = op.body {
                if distinct { needed.formUnion(logsToLoad(forDistinct: Set(participants))) }
            } else {
                needed.insert(op.conversation)
                needed.formUnion(members(ofGroupContaining: op.conversation))
            }
        }
        return needed.filter { !isLoaded($0) }
    }

    /// The logs not in memory that finding the distinct conversation for `participants` (or
    /// the generation of a new one) reads: the members of every group for that set.
    public func logsToLoad(forDistinct participants: Set<UserID>) -> Set<ConversationID> {
        let sorted = participants.sorted()
        var needed: Set<ConversationID> = []
        for (key, members) in groups where key.participants == sorted { needed.formUnion(members) }
        return needed.filter { !isLoaded($0) }
    }

    /// Loads one conversation's log from every operation stored for it (accepted, pending and
    /// refused by the merge rules), in the order they were decided. A log already in memory is
    /// left as it is.
    public mutating func load(_ id: ConversationID, operations: [SignedOperation]) {
        guard isPartial, logs[id] == nil else { return }
        precondition(operations.allSatisfy { $0.operation.conversation == id }, "a log is loaded from its own operations")
        logs[id] = ConversationLog(id: id, keepsBodies: false)
        _ = apply(verified: operations)
    }

    /// Drops from memory every log but those of the merge groups of `conversations`.
    public mutating func unloadLogs(exceptGroupsOf conversations: Set<ConversationID>) {
        var keep = conversations
        for id in conversations { keep.formUnion(members(ofGroupContaining: id)) }
        unload(loadedConversations.subtracting(keep))
    }

    /// Drops logs from memory, with the operations waiting in them. The index of creations
    /// stays, so merge groups and lookups still see them. A complete replica keeps its logs.
    ///
    /// Costs the logs dropped and their pending operations (each one's own entries in the
    /// indexes), never the operations waiting in the logs kept.
    public mutating func unload(_ ids: Set<ConversationID>) {
        guard isPartial, !ids.isEmpty else { return }
        for id in ids {
            logs[id] = nil
            guard let waiting = pendingByConversation.removeValue(forKey: id) else { continue }
            for operation in waiting { _ = unhold(operation) }
        }
    }
}
