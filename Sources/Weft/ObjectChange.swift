import WeftModel
import WeftStore

/// One object change, as the SDK's change notifications describe it.
public struct ObjectChange: Sendable, Equatable {
    public enum Object: Sendable, Equatable {
        case conversation(Conversation)
        case message(Message)
        /// A deleted object, by identifier.
        case deleted(WeftIdentifier)
    }

    /// A property of a `Conversation` or `Message` an update names: a typed key, so a reader
    /// that switches over it cannot miss one by a typo. `name` is the Swift property's name.
    public enum Property: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        // Conversation
        case participants, isDistinct, metadata, mergedIdentifiers, totalMessageCount, unreadMessageCount, lastMessageAt
        // Message
        case conversation, position, recipientStatus, isSent

        public var name: String { rawValue }
        public var description: String { rawValue }

        init(_ property: ChangeSet.ConversationChange.Property) {
            self =
                switch property {
                case .participants: .participants
                case .isDistinct: .isDistinct
                case .metadata: .metadata
                case .mergedIDs: .mergedIdentifiers
                case .messageCount: .totalMessageCount
                case .unreadCount: .unreadMessageCount
                case .lastMessageAt: .lastMessageAt
                }
        }

        init(_ property: ChangeSet.MessageChange.Property) {
            self =
                switch property {
                case .conversation: .conversation
                case .position: .position
                case .recipientStatus: .recipientStatus
                }
        }
    }

    public typealias Kind = ChangeSet.Kind
    public let object: Object
    public let kind: Kind
    /// For updates: which property changed, and its old and new values.
    public let property: Property?
    public let oldValue: ChangeSet.Value
    public let newValue: ChangeSet.Value
}

/// What one commit of the store changed, as the client shows it. A collection of the changes.
public struct ObjectChanges: Sendable, Equatable, RandomAccessCollection {
    public let changes: [ObjectChange]
    /// The store's number for the commit (`CommittedChanges.number`).
    public let number: UInt64
    /// Batches this subscriber missed just before this one because it fell more than
    /// `Store.changeBufferLimit` batches behind. Nonzero: re-read what you show.
    public let missedBatches: Int

    public var startIndex: Int { changes.startIndex }
    public var endIndex: Int { changes.endIndex }
    public subscript(position: Int) -> ObjectChange { changes[position] }

    /// The client's view of a committed batch: conversations, messages (a local message is
    /// unsent while it waits in the outbox), and the "sent" flag of messages leaving the outbox.
    init(_ committed: CommittedChanges, localUser: UserID) {
        var changes: [ObjectChange] = []
        for change in committed.changes.conversations {
            let object: ObjectChange.Object =
                change.snapshot.map { .conversation(Conversation($0)) } ?? .deleted(.conversation(change.id))
            changes.append(ObjectChange(
                object: object, kind: change.kind, property: change.property.map(ObjectChange.Property.init),
                oldValue: change.oldValue, newValue: change.newValue))
        }
        for change in committed.changes.messages {
            let object: ObjectChange.Object =
                change.snapshot.map { .message(Message($0, localUser: localUser, unsent: committed.waitingMessages.contains($0.id))) }
                ?? .deleted(.message(change.id))
            changes.append(ObjectChange(
                object: object, kind: change.kind, property: change.property.map(ObjectChange.Property.init),
                oldValue: change.oldValue, newValue: change.newValue))
        }
        for change in committed.outbox {
            // A new entry comes with its message's creation; only leaving (or re-entering) the
            // waiting state changes what `isSent` says.
            guard let previous = change.previousState, let snapshot = change.message,
                (previous == .waiting) != (change.entry.state == .waiting)
            else { continue }
            let waiting = change.entry.state == .waiting
            changes.append(ObjectChange(
                object: .message(Message(snapshot, localUser: localUser, unsent: waiting)), kind: .update, property: .isSent,
                oldValue: .bool(previous != .waiting), newValue: .bool(!waiting)))
        }
        self.changes = changes
        number = committed.number
        missedBatches = committed.missedBatches
    }
}

/// The client's change stream: the store's, translated. It buffers nothing of its own: each
/// batch is translated when the consumer asks for it.
public struct ObjectChangeStream: AsyncSequence, Sendable {
    public typealias Element = ObjectChanges
    public typealias Failure = Never

    let base: ChangeStream
    let localUser: UserID

    public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), localUser: localUser) }

    public struct Iterator: AsyncIteratorProtocol {
        var base: ChangeStream.Iterator
        let localUser: UserID

        public mutating func next() async -> ObjectChanges? {
            await base.next().map { ObjectChanges($0, localUser: localUser) }
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> ObjectChanges? {
            await base.next(isolation: actor).map { ObjectChanges($0, localUser: localUser) }
        }
    }
}
