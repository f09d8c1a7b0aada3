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
    public mutating func applyReportingChangesIncrementally(verified operations: [SignedOperation]) -> (Report, ChangeSet) {
        // What the batch can change, exactly as `applyReportingChanges` finds it.
        var relevant = Set(operations.map(\.operation.conversation))
        for op in operations {
            if case .createConversation(let participants, true, let generation, _) = op.operation.body {
                relevant.formUnion(groups[GroupKey(participants: participants, generation: generation)] ?? [])
            }
        }
        for id in relevant { relevant.formUnion(members(ofGroupContaining: id)) }
        // Shares storage with `self`: the logs the batch changes are copied once, on their first change.
        let before = self
        let beforeGroups = before.groupsByCanonical(relevant)
        let report = apply(verified: operations)
        for id in report.touched { relevant.formUnion(members(ofGroupContaining: id)) }
        let afterGroups = groupsByCanonical(relevant)

        var old = View()
        var new = View()
        for (canonical, group) in beforeGroups { old.conversations[canonical] = group.snapshot }
        for (canonical, group) in afterGroups { new.conversations[canonical] = group.snapshot }

        for canonical in Set(beforeGroups.keys).union(afterGroups.keys) {
            if let members = afterGroups[canonical]?.members, beforeGroups[canonical]?.members == members,
                let was = old.conversations[canonical], let now = new.conversations[canonical],
                let changed = changedMessages(in: members, since: before)
            {
                // Only the new and the receipted messages can differ.
                let live = members.flatMap { id in
                    let log = logs[id]!
                    return log.messages.values.filter { !log.deleted.contains($0.id) }.map { (log, $0) }
                }
                .sorted { MessageSnapshot.precedes(($0.1.timestamp, $0.1.sender, $0.1.id), ($1.1.timestamp, $1.1.sender, $1.1.id)) }
                // The new messages must come after every message the group had: then no other
                // message moved.
                let appended = Set(live.suffix(changed.appended.count).map(\.1.id))
                guard appended == changed.appended else {
                    fullViews(of: canonical, before: before, old: &old, new: &new)
                    continue
                }
                for (position, (log, message)) in live.enumerated()
                where changed.appended.contains(message.id) || changed.receipted.contains(message.id) {
                    new.messages[message.id] = Self.snapshot(
                        of: message, in: log, conversation: canonical, participants: now.participants, position: position)
                    if let earlier = before.logs[log.id]?.messages[message.id] {
                        old.messages[message.id] = Self.snapshot(
                            of: earlier, in: before.logs[log.id]!, conversation: canonical, participants: was.participants,
                            position: position)
                    }
                }
            } else {
                fullViews(of: canonical, before: before, old: &old, new: &new)
            }
        }
        return (report, ChangeSet(from: old, to: new))
    }

    /// Canonical conversation -> its group's members and snapshot, for the groups holding
    /// `ids` (as `view(of:)` walks them: conversations without a creation are skipped).
    private func groupsByCanonical(
        _ ids: Set<ConversationID>
    ) -> [ConversationID: (members: [ConversationID], snapshot: ConversationSnapshot)] {
        var result: [ConversationID: (members: [ConversationID], snapshot: ConversationSnapshot)] = [:]
        for id in ids {
            let members = members(ofGroupContaining: id)
            guard let canonical = members.first, result[canonical] == nil, let snapshot = conversation(canonical) else { continue }
            result[canonical] = (members, snapshot)
        }
        return result
    }

    /// Every message of the group on both sides, as `view(of:)` has them.
    private func fullViews(of canonical: ConversationID, before: Replica, old: inout View, new: inout View) {
        if old.conversations[canonical] != nil {
            for message in before.messages(in: canonical) { old.messages[message.id] = message }
        }
        if new.conversations[canonical] != nil {
            for message in messages(in: canonical) { new.messages[message.id] = message }
        }
    }

    /// The messages the operations accepted since `before` can have changed in these logs:
    /// the messages they posted and the messages their receipts name. Nil when they did
    /// anything else that changes messages (membership, watermarks, deletions, creations,
    /// a rebuilt log after a fork): the group then needs complete views.
    private func changedMessages(
        in members: [ConversationID], since before: Replica
    ) -> (appended: Set<OperationID>, receipted: Set<OperationID>)? {
        var appended: Set<OperationID> = []
        var receipted: Set<OperationID> = []
        for id in members {
            guard let earlier = before.logs[id], let log = logs[id] else { return nil }
            // A fork rebuilds the log: what it had is then no longer a prefix of what it has.
            guard log.order.count >= earlier.order.count,
                earlier.order.isEmpty || log.order[earlier.order.count - 1].id == earlier.order.last!.id
            else { return nil }
            for signed in log.order[earlier.order.count...] {
                switch signed.operation.body {
                case .postMessage: appended.insert(signed.id)
                case .delivered(let ids), .read(let ids): receipted.formUnion(ids)
                case .setMetadata: break
                case .createConversation, .addParticipants, .removeParticipants, .markAllRead, .deleteMessage: return nil
                }
            }
        }
        return (appended, receipted.subtracting(appended))
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
