extension Replica {
    /// Applies a batch and reports what changed: the same result as
    /// `applyReportingChanges(verified:)`, without building every message snapshot of every
    /// group the batch touches twice.
    ///
    /// `applyReportingChanges` compares complete views (all messages of each touched group)
    /// from before and after, which costs the size of the conversations for every batch: a
    /// store applying batches to large conversations spends its time there. Here a group whose
    /// batch only appends messages (after every message it had), adds receipts naming
    /// messages, or sets metadata compares just those messages; any other change to a group
    /// (a merge, a membership change, a watermark, a deletion, a message arriving before
    /// others, a fork) compares the group's complete views as before. Messages left out of
    /// both views are ones whose snapshots are equal before and after, so the change set is
    /// identical.
    ///
    /// - Parameters:
    ///   - current: the snapshot of a canonical conversation as it stands before the batch, if
    ///     the caller has it at hand (a store reads it from its tables), else nil. Computing one
    ///     costs the size of the conversation; debug builds check what the caller gives against it.
    ///   - position: a message's position as it stands before the batch, if the caller has it at
    ///     hand (a store's change set of an earlier batch in the same transaction), else nil.
    ///     A receipt naming a message costs its position, which otherwise means counting the
    ///     messages of its conversation; debug builds check what the caller gives.
    ///   - onlyShown: report only the groups the local user sees (`shows(_:)`): what a group
    ///     the node only relays does is worked out for none of its messages, and a group the
    ///     local user joins in the batch is reported created, with every message it holds.
    public mutating func applyReportingChangesIncrementally(
        verified operations: [SignedOperation], current: (ConversationID) -> ConversationSnapshot? = { _ in nil },
        position: (OperationID) -> Int? = { _ in nil }, onlyShown: Bool = false
    ) -> (Report, ChangeSet) {
        // What the batch can change, exactly as `applyReportingChanges` finds it.
        var relevant = Set(operations.map(\.operation.conversation))
        for op in operations {
            if case .createConversation(let participants, true, let generation, _) = op.operation.body {
                relevant.formUnion(groups[GroupKey(participants: participants, generation: generation)] ?? [])
            }
        }
        for id in relevant { relevant.formUnion(members(ofGroupContaining: id)) }
        var beforeGroups = groupsByCanonical(relevant)
        if onlyShown { beforeGroups = beforeGroups.filter { shows($0.key) } }
        var old = View()
        for canonical in beforeGroups.keys {
            if let snapshot = current(canonical) {
                assert(snapshot == conversation(canonical), "the caller's snapshot of \(canonical) is not the replica's")
                old.conversations[canonical] = snapshot
            } else {
                old.conversations[canonical] = conversation(canonical)
            }
        }

        // The common batch (messages after the latest, receipts, metadata) needs nothing more
        // of the state before than its plan: no copy of the replica is kept, so the logs are
        // changed in place instead of being copied whole.
        if let plan = simplePlan(for: operations, groups: beforeGroups, snapshots: old.conversations) {
            let report = apply(verified: operations)
            var new = View()
            for (canonical, members) in beforeGroups {
                guard let changed = changedMessages(in: members, since: plan.orders), let was = old.conversations[canonical],
                    addChanges(
                        changed, in: canonical, was: was, prior: { _, id, _ in plan.receipted[id] },
                        position: position, old: &old, new: &new)
                else {
                    // The plan's conditions rule this out (nothing pending is released, no
                    // sequence number reused, messages after the latest).
                    assertionFailure("a planned batch did more than it could")
                    new.conversations[canonical] = conversation(canonical)
                    for message in messages(in: canonical) { new.messages[message.id] = message }
                    continue
                }
            }
            return (report, ChangeSet(from: old, to: new))
        }

        // Anything else: keep the state before (shared storage; the logs the batch changes
        // are copied once, on their first change) and compare complete views where needed.
        let before = self
        let report = apply(verified: operations)
        for id in report.touched { relevant.formUnion(members(ofGroupContaining: id)) }
        let afterGroups = groupsByCanonical(relevant)
        let prior = { (logID: ConversationID, id: OperationID, was: ConversationSnapshot) -> (snapshot: MessageSnapshot, wasUnread: Bool)? in
            guard let log = before.logs[logID], let message = log.messages[id], !log.deleted.contains(id) else { return nil }
            return (
                Self.snapshot(of: message, in: log, conversation: was.id, participants: was.participants, position: 0),
                before.isUnread(id, postedTo: logID)
            )
        }

        var new = View()
        for (canonical, members) in afterGroups where !onlyShown || shows(canonical) {
            if beforeGroups[canonical] == members, let was = old.conversations[canonical],
                let changed = changedMessages(in: members, since: before.orders(of: members)),
                addChanges(changed, in: canonical, was: was, prior: prior, position: position, old: &old, new: &new)
            {
                continue
            }
            new.conversations[canonical] = conversation(canonical)
            for message in messages(in: canonical) { new.messages[message.id] = message }
            if old.conversations[canonical] != nil {
                for message in before.messages(in: canonical) { old.messages[message.id] = message }
            }
        }
        for canonical in beforeGroups.keys where afterGroups[canonical] == nil && old.conversations[canonical] != nil {
            for message in before.messages(in: canonical) { old.messages[message.id] = message }
        }
        return (report, ChangeSet(from: old, to: new))
    }

    /// What the incremental comparison keeps of the state before a planned batch.
    private struct Plan {
        /// Each member log's operation count and last operation.
        var orders: [ConversationID: (count: Int, last: OperationID?)]
        /// The messages the batch's receipts name, as they were, and whether the local user
        /// had not read them.
        var receipted: [OperationID: (snapshot: MessageSnapshot, wasUnread: Bool)]
    }

    /// A plan when the batch can only append messages after each group's latest, add receipts
    /// and set metadata, and nothing else can happen: nothing waits for causes in the logs it
    /// writes to (so nothing else is released: an operation's causes are in its own log, and
    /// one waiting elsewhere for it only waits again), and no operation reuses a sequence
    /// number (so no log is rebuilt). Operations pending in other logs do not matter.
    private func simplePlan(
        for operations: [SignedOperation], groups: [ConversationID: [ConversationID]],
        snapshots: [ConversationID: ConversationSnapshot]
    ) -> Plan? {
        guard operations.allSatisfy({ pendingByConversation[$0.operation.conversation] == nil }) else { return nil }
        var canonicalOf: [ConversationID: ConversationID] = [:]
        for (canonical, members) in groups { for member in members { canonicalOf[member] = canonical } }
        // Hashed as words, not as a concatenated byte array (which allocated per operation and
        // hashed byte by byte: the most of this function's time).
        struct Slot: Hashable {
            let conversation: ConversationID
            let author: UserID
            let sequence: UInt64
        }
        var slots: Set<Slot> = []
        slots.reserveCapacity(operations.count)
        var named: [(ConversationID, OperationID)] = []
        for signed in operations {
            let op = signed.operation
            guard !isKnown(signed.id, in: op.conversation) else { continue }
            guard op.sequence >= nextSequence(for: op.author, in: op.conversation),
                slots.insert(Slot(conversation: op.conversation, author: op.author, sequence: op.sequence)).inserted
            else { return nil }
            switch op.body {
            case .postMessage:
                break  // after the latest, or among earlier ones (those after it move on by one)
            case .delivered(let ids), .read(let ids):
                named += ids.map { (op.conversation, $0) }
            case .setMetadata:
                break
            case .createConversation, .addParticipants, .removeParticipants, .markAllRead, .deleteMessage:
                return nil
            }
        }
        var plan = Plan(orders: [:], receipted: [:])
        for members in groups.values { plan.orders.merge(orders(of: members)) { a, _ in a } }
        for (logID, id) in named where plan.receipted[id] == nil {
            guard let canonical = canonicalOf[logID], let was = snapshots[canonical], let log = logs[logID],
                let message = log.messages[id], !log.deleted.contains(id)
            else { continue }
            plan.receipted[id] = (
                Self.snapshot(of: message, in: log, conversation: canonical, participants: was.participants, position: 0),
                isUnread(id, postedTo: logID)
            )
        }
        return plan
    }

    /// Each log's operation count and last operation, to find what a batch added.
    private func orders(of members: [ConversationID]) -> [ConversationID: (count: Int, last: OperationID?)] {
        var result: [ConversationID: (count: Int, last: OperationID?)] = [:]
        for id in members { if let log = logs[id] { result[id] = (log.order.count, log.order.last?.id) } }
        return result
    }

    /// Adds to the views what a group's batch changed when that is only posted messages,
    /// receipts and metadata (`changed`): the conversation as it is now, derived from `was`,
    /// and on both sides the posted and receipted messages and the messages a posted one came
    /// before (their positions moved on). Posted messages mostly come after every message the
    /// group had, so those are few. True unless an invariant broke (then the caller builds
    /// complete views): the caller's other cases need complete views.
    private func addChanges(
        _ changed: ChangedMessages, in canonical: ConversationID, was: ConversationSnapshot,
        prior: (ConversationID, OperationID, ConversationSnapshot) -> (snapshot: MessageSnapshot, wasUnread: Bool)?,
        position known: (OperationID) -> Int?, old: inout View, new: inout View
    ) -> Bool {
        let posted = changed.appended.map { MessageOrder.Key($0.1.timestamp, $0.1.sender, $0.1.id) }.sorted { $0.precedes($1) }
        let postedIDs = Set(posted.map(\.id))
        var postedOrder = MessageOrder()
        for key in posted { postedOrder.insert(key) }
        let groupLogs = ([canonical] + was.mergedIDs).compactMap { logs[$0] }
        guard groupLogs.count == was.mergedIDs.count + 1 else { return false }

        // The conversation: only counts, the latest message and metadata can have moved.
        var now = was
        now.messageCount += posted.count
        if let last = posted.last, was.lastMessageAt.map({ $0 < last.timestamp }) ?? true { now.lastMessageAt = last.timestamp }
        var metadata: [String: ConversationLog.MetadataValue] = [:]
        for log in groupLogs {
            for (key, value) in log.metadata {
                if let current = metadata[key], !ConversationLog.lastWriterWins(value, over: current) { continue }
                metadata[key] = value
            }
        }
        now.metadata = metadata.compactMapValues(\.value)
        // The plan leaves membership alone, so whether the local user's unread count runs (only
        // while they take part) is as it was.
        if let user = localUser, was.participants.contains(user) {
            for (log, message) in changed.appended where message.sender != user && !Self.hasRead(user, message, in: log) {
                now.unreadCount += 1
            }
            for (logID, id) in changed.receipted {
                // Read only grows: a message unread before and read now leaves the count.
                if prior(logID, id, was)?.wasUnread == true && !isUnread(id, postedTo: logID) { now.unreadCount -= 1 }
            }
        }
        new.conversations[canonical] = now

        // Messages that were there before and whose snapshots change: those receipts named,
        // and those a posted message now precedes.
        var kept: [OperationID: (ConversationLog, ConversationLog.Message)] = [:]
        for (logID, id) in changed.receipted {
            guard let log = logs[logID], let message = log.messages[id], !log.deleted.contains(id) else { continue }
            kept[id] = (log, message)
        }
        var postedAfterAll = true
        if let first = posted.first {
            for log in groupLogs {
                for key in log.messageOrder.keys(after: first) where !postedIDs.contains(key.id) {
                    postedAfterAll = false
                    if kept[key.id] == nil, let message = log.messages[key.id] { kept[key.id] = (log, message) }
                }
            }
        }

        // Positions now; a kept message's position before is that less the posted messages
        // before it. Posted messages after every earlier one follow the count before.
        var postedPositions: [OperationID: Int] = [:]
        if postedAfterAll {
            for (rank, key) in posted.enumerated() { postedPositions[key.id] = was.messageCount + rank }
        } else {
            postedPositions = Self.positions(of: changed.appended.map(\.1), among: groupLogs, known: { _ in nil })
        }
        // Sized once: grown one message at a time, the views rehashed over and over.
        new.messages.reserveCapacity(new.messages.count + changed.appended.count + kept.count)
        old.messages.reserveCapacity(old.messages.count + kept.count)
        // Positions are computed for every message asked for; a miss falls back to complete
        // views, as a batch the plan did not foresee does.
        for (log, message) in changed.appended {
            guard let position = postedPositions[message.id] else { return false }
            new.messages[message.id] = Self.snapshot(
                of: message, in: log, conversation: canonical, participants: now.participants, position: position)
        }
        func postedBefore(_ key: MessageOrder.Key) -> Int { postedOrder.countPreceding(key) }
        let keptMessages = Array(kept.values)
        let positions = Self.positions(
            of: keptMessages.map(\.1), among: groupLogs,
            known: { id in
                // The caller knows positions before the batch.
                guard let before = known(id), let (_, message) = kept[id] else { return nil }
                return before + postedBefore(MessageOrder.Key(message.timestamp, message.sender, message.id))
            })
        for (log, message) in keptMessages {
            guard let position = positions[message.id] else { return false }
            let positionBefore = position - postedBefore(MessageOrder.Key(message.timestamp, message.sender, message.id))
            new.messages[message.id] = Self.snapshot(
                of: message, in: log, conversation: canonical, participants: now.participants, position: position)
            // Not receipted: only its position moved.
            var earlier = prior(log.id, message.id, was)?.snapshot
                ?? Self.snapshot(of: message, in: log, conversation: canonical, participants: was.participants, position: 0)
            earlier.position = positionBefore
            old.messages[message.id] = earlier
        }
        return true
    }

    /// The positions of `messages` in the order of the live messages of `logs` (SPEC.md §13.5):
    /// those the caller knows (`known`), and the others by a binary search in each log's
    /// order of live messages.
    private static func positions(
        of messages: [ConversationLog.Message], among logs: [ConversationLog], known: (OperationID) -> Int?
    ) -> [OperationID: Int] {
        guard !messages.isEmpty else { return [:] }
        var positions: [OperationID: Int] = [:]
        for message in messages {
            let key = MessageOrder.Key(message.timestamp, message.sender, message.id)
            positions[message.id] = known(message.id) ?? logs.reduce(0) { $0 + $1.messageOrder.countPreceding(key) }
        }
        // Debug builds count them the slow way too: the orders must agree with the logs.
        assert(counted(messages, among: logs) == positions, "a position is not the replica's")
        return positions
    }

    /// The positions of `messages` among the live messages of `logs`, counted in one pass over
    /// every message (debug builds check the logs' orders with it): each live message counts
    /// for the wanted messages it precedes, the first of which a binary search over the wanted
    /// ones (sorted) finds.
    private static func counted(_ messages: [ConversationLog.Message], among logs: [ConversationLog]) -> [OperationID: Int] {
        guard !messages.isEmpty else { return [:] }
        let wanted = messages.sorted {
            MessageSnapshot.precedes(($0.timestamp, $0.sender, $0.id), ($1.timestamp, $1.sender, $1.id))
        }
        // precedingFirst[j]: live messages that precede wanted[j] and none before it.
        var precedingFirst = [Int](repeating: 0, count: wanted.count + 1)
        for log in logs {
            for (id, message) in log.messages where !log.deleted.contains(id) {
                var low = 0
                var high = wanted.count
                while low < high {
                    let middle = (low + high) / 2
                    let other = wanted[middle]
                    if MessageSnapshot.precedes((message.timestamp, message.sender, id), (other.timestamp, other.sender, other.id)) {
                        high = middle
                    } else {
                        low = middle + 1
                    }
                }
                precedingFirst[low] += 1
            }
        }
        var positions: [OperationID: Int] = [:]
        var running = 0
        for (index, message) in wanted.enumerated() {
            running += precedingFirst[index]
            positions[message.id] = running
        }
        return positions
    }

    /// Canonical conversation -> its group's members, for the groups holding `ids` (as
    /// `view(of:)` walks them: conversations without a creation are skipped).
    private func groupsByCanonical(_ ids: Set<ConversationID>) -> [ConversationID: [ConversationID]] {
        var result: [ConversationID: [ConversationID]] = [:]
        for id in ids {
            let members = members(ofGroupContaining: id)
            guard let canonical = members.first, logs[canonical]?.creation != nil else { continue }
            result[canonical] = members
        }
        return result
    }

    /// What the operations accepted since `before` did to a group's messages.
    struct ChangedMessages {
        /// Messages posted, with their logs.
        var appended: [(ConversationLog, ConversationLog.Message)] = []
        /// Messages receipts named (log, message), not among `appended`.
        var receipted: [(ConversationID, OperationID)] = []
    }

    /// The messages the operations accepted since `before` can have changed in these logs:
    /// the messages they posted and the messages their receipts name. Nil when they did
    /// anything else that changes messages (membership, watermarks, deletions, creations,
    /// a rebuilt log after a fork): the group then needs complete views.
    private func changedMessages(
        in members: [ConversationID], since orders: [ConversationID: (count: Int, last: OperationID?)]
    ) -> ChangedMessages? {
        var changed = ChangedMessages()
        var posted: Set<OperationID> = []
        var named: [(ConversationID, OperationID)] = []
        for id in members {
            guard let earlier = orders[id], let log = logs[id] else { return nil }
            // A fork rebuilds the log: what it had is then no longer a prefix of what it has.
            guard log.order.count >= earlier.count, earlier.count == 0 || log.order[earlier.count - 1].id == earlier.last
            else { return nil }
            for signed in log.order[earlier.count...] {
                switch signed.operation.body {
                case .postMessage:
                    guard let message = log.messages[signed.id] else { return nil }
                    changed.appended.append((log, message))
                    posted.insert(signed.id)
                case .delivered(let ids), .read(let ids):
                    named += ids.map { (id, $0) }
                case .setMetadata:
                    break
                case .createConversation, .addParticipants, .removeParticipants, .markAllRead, .deleteMessage:
                    return nil
                }
            }
        }
        var seen: Set<OperationID> = []
        changed.receipted = named.filter { !posted.contains($0.1) && seen.insert($0.1).inserted }
        return changed
    }

    /// A message's snapshot, exactly as `messages(in:)` builds it.
    static func snapshot(
        of message: ConversationLog.Message, in log: ConversationLog, conversation: ConversationID, participants: [UserID],
        position: Int
    ) -> MessageSnapshot {
        var status: [UserID: RecipientStatus] = [:]
        for user in participants where user != message.sender {
            status[user] = Self.status(of: message, for: user, in: log)
        }
        return MessageSnapshot(
            id: message.id, conversation: conversation, postedTo: log.id, sender: message.sender, sentAt: message.timestamp,
            parts: message.parts, options: message.options, position: position, recipientStatus: status)
    }
}
