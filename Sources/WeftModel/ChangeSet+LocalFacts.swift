extension ChangeSet.MessageChange {
    /// An update of a message's recipient statuses from `old` to those of `snapshot`: for a
    /// store's local facts about the local user's messages (a delivery failure), which no
    /// operation carries.
    public static func recipientStatusUpdate(of snapshot: MessageSnapshot, from old: [UserID: RecipientStatus]) -> Self {
        Self(id: snapshot.id, kind: .update, property: .recipientStatus, oldValue: .statuses(old),
             newValue: .statuses(snapshot.recipientStatus), snapshot: snapshot)
    }
}

extension ChangeSet.ConversationChange {
    /// A conversation's deletion: a store pruned it (a log it only relayed, past retention).
    public static func deletion(of id: ConversationID) -> Self {
        Self(id: id, kind: .delete, oldValue: .none, newValue: .none, snapshot: nil)
    }
}
