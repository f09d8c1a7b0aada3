/// What an applied batch changed, as a UI needs it (SPEC.md §13; the SDK's object changes):
/// each conversation or message created, updated (with the property and its old and new value)
/// or deleted. Built by comparing snapshots before and after, so it reports exactly what a
/// reader would see differ, merges included.
public struct ChangeSet: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case create, update, delete }

    /// A property's value before or after, in a form every change can carry.
    public enum Value: Sendable, Equatable, CustomStringConvertible {
        case none
        case bool(Bool)
        case int(Int)
        case conversation(ConversationID)
        case conversations([ConversationID])
        case users([UserID])
        case metadata([String: String])
        case statuses([UserID: RecipientStatus])
        case timestamp(HLCTimestamp)

        public var description: String {
            switch self {
            case .none: "none"
            case .bool(let value): "\(value)"
            case .int(let value): "\(value)"
            case .conversation(let id): "\(id)"
            case .conversations(let ids): "\(ids)"
            case .users(let users): "\(users.map(\.description))"
            case .metadata(let metadata): "\(metadata)"
            case .statuses(let statuses): "\(statuses.map { "\($0.key): \($0.value)" }.sorted())"
            case .timestamp(let timestamp): "\(timestamp)"
            }
        }
    }

    public struct ConversationChange: Sendable, Equatable {
        /// The properties of a conversation an update can name, in the order a change set
        /// lists them. A typed key: a reader that switches over it cannot miss one by a typo.
        public enum Property: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
            case participants, isDistinct, metadata, mergedIDs, messageCount, unreadCount, lastMessageAt

            /// The `ConversationSnapshot` property's name, for logs.
            public var name: String {
                switch self {
                case .participants: "participants"
                case .isDistinct: "isDistinct"
                case .metadata: "metadata"
                case .mergedIDs: "mergedIDs"
                case .messageCount: "messageCount"
                case .unreadCount: "unreadCount"
                case .lastMessageAt: "lastMessageAt"
                }
            }

            public var description: String { name }
        }

        public var id: ConversationID
        public var kind: Kind
        /// For updates: the property, old value, new value.
        public var property: Property?
        public var oldValue: Value
        public var newValue: Value
        /// The conversation as it is now (nil for a delete).
        public var snapshot: ConversationSnapshot?
    }

    public struct MessageChange: Sendable, Equatable {
        /// The properties of a message an update can name, in the order a change set lists them.
        public enum Property: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
            case conversation, position, recipientStatus

            /// The `MessageSnapshot` property's name, for logs.
            public var name: String {
                switch self {
                case .conversation: "conversation"
                case .position: "position"
                case .recipientStatus: "recipientStatus"
                }
            }

            public var description: String { name }
        }

        public var id: OperationID
        public var kind: Kind
        public var property: Property?
        public var oldValue: Value
        public var newValue: Value
        public var snapshot: MessageSnapshot?
    }

    public var conversations: [ConversationChange] = []
    public var messages: [MessageChange] = []

    public var isEmpty: Bool { conversations.isEmpty && messages.isEmpty }

    public init() {}
}

extension Replica {
    /// Snapshots of everything `touched` (log identifiers) shows, for diffing.
    public struct View: Sendable {
        var conversations: [ConversationID: ConversationSnapshot] = [:]
        var messages: [OperationID: MessageSnapshot] = [:]
    }

    /// The view of the groups that hold `touched`, plus every member of them.
    /// `onlyShown`: leaves out the groups the local user does not see (`shows(_:)`).
    public func view(of touched: Set<ConversationID>, onlyShown: Bool = false) -> View {
        var view = View()
        var seen: Set<ConversationID> = []
        for id in touched {
            let members = members(ofGroupContaining: id)
            for member in members { seen.insert(member) }
            guard let canonical = members.first, view.conversations[canonical] == nil,
                !onlyShown || shows(canonical), let snapshot = conversation(canonical)
            else { continue }
            view.conversations[canonical] = snapshot
            for message in messages(in: canonical) { view.messages[message.id] = message }
        }
        return view
    }

    /// Applies a batch and reports what changed for readers (`onlyShown`: in the groups the
    /// local user sees alone, as a store reports them).
    public mutating func applyReportingChanges(verified operations: [SignedOperation], onlyShown: Bool = false) -> (Report, ChangeSet) {
        // Everything the batch can change: the conversations it names, and the merge groups
        // they are in or that a creation in it joins.
        var relevant = Set(operations.map(\.operation.conversation))
        for op in operations {
            if case .createConversation(let participants, true, let generation, _) = op.operation.body {
                relevant.formUnion(groups[GroupKey(participants: participants, generation: generation)] ?? [])
            }
        }
        for id in relevant { relevant.formUnion(members(ofGroupContaining: id)) }
        let before = view(of: relevant, onlyShown: onlyShown)
        let report = apply(verified: operations)
        for id in report.touched { relevant.formUnion(members(ofGroupContaining: id)) }
        return (report, ChangeSet(from: before, to: view(of: relevant, onlyShown: onlyShown)))
    }
}

extension ChangeSet {
    init(from before: Replica.View, to after: Replica.View) {
        let old = before.conversations
        let oldMessages = before.messages

        for id in Set(old.keys).union(after.conversations.keys).sorted() {
            switch (old[id], after.conversations[id]) {
            case (nil, let new?):
                conversations.append(.init(id: id, kind: .create, oldValue: .none, newValue: .none, snapshot: new))
            case (_?, nil):
                conversations.append(.init(id: id, kind: .delete, oldValue: .none, newValue: .none, snapshot: nil))
            case (let was?, let now?) where was != now:
                for (property, a, b) in Self.conversationProperties(was, now) where a != b {
                    conversations.append(.init(id: id, kind: .update, property: property, oldValue: a, newValue: b, snapshot: now))
                }
            default:
                break
            }
        }
        for id in Set(oldMessages.keys).union(after.messages.keys).sorted() {
            switch (oldMessages[id], after.messages[id]) {
            case (nil, let new?):
                messages.append(.init(id: id, kind: .create, oldValue: .none, newValue: .none, snapshot: new))
            case (_?, nil):
                messages.append(.init(id: id, kind: .delete, oldValue: .none, newValue: .none, snapshot: nil))
            case (let was?, let now?) where was != now:
                for (property, a, b) in Self.messageProperties(was, now) where a != b {
                    messages.append(.init(id: id, kind: .update, property: property, oldValue: a, newValue: b, snapshot: now))
                }
            default:
                break
            }
        }
    }

    private static func conversationProperties(
        _ a: ConversationSnapshot, _ b: ConversationSnapshot
    ) -> [(ConversationChange.Property, Value, Value)] {
        [
            (.participants, .users(a.participants), .users(b.participants)),
            (.isDistinct, .bool(a.isDistinct), .bool(b.isDistinct)),
            (.metadata, .metadata(a.metadata), .metadata(b.metadata)),
            (.mergedIDs, .conversations(a.mergedIDs), .conversations(b.mergedIDs)),
            (.messageCount, .int(a.messageCount), .int(b.messageCount)),
            (.unreadCount, .int(a.unreadCount), .int(b.unreadCount)),
            (.lastMessageAt, a.lastMessageAt.map(Value.timestamp) ?? .none, b.lastMessageAt.map(Value.timestamp) ?? .none),
        ]
    }

    private static func messageProperties(_ a: MessageSnapshot, _ b: MessageSnapshot) -> [(MessageChange.Property, Value, Value)] {
        [
            (.conversation, .conversation(a.conversation), .conversation(b.conversation)),
            (.position, .int(a.position), .int(b.position)),
            (.recipientStatus, .statuses(a.recipientStatus), .statuses(b.recipientStatus)),
        ]
    }
}
