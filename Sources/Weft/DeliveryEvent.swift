import WeftModel
import WeftStore

/// One step in the delivery of a message the local user sent (the Sinch callbacks): sent once
/// another node stored it, then per recipient delivered, read, or failed with a reason.
public struct DeliveryEvent: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// Another node confirmed it stored the message (`Message.isSent` became true).
        case sent
        /// The recipient's node stored it.
        case delivered
        /// The recipient read it.
        case read
        /// The recipient's node did not deliver it within its time to live, or a node refused
        /// it ("expired: not delivered within 12 h", "rejected: REASON"). A delivery that
        /// arrives later still comes as `delivered`.
        case failed(reason: String)
    }

    public let message: OperationID
    /// The conversation it appears in (the canonical one, after merges).
    public let conversation: ConversationID
    /// The recipient; nil for `sent`, which is about the message.
    public let recipient: UserID?
    public let kind: Kind

    public init(message: OperationID, conversation: ConversationID, recipient: UserID?, kind: Kind) {
        self.message = message
        self.conversation = conversation
        self.recipient = recipient
        self.kind = kind
    }

    /// The events a committed batch holds for the local user's messages: `sent` when an outbox
    /// entry becomes sent; per recipient whose status rose, `delivered`, `read` (after
    /// `delivered` when both came at once: read implies delivered) or `failed`.
    static func events(in batch: CommittedChanges, localUser: UserID) -> [DeliveryEvent] {
        var events: [DeliveryEvent] = []
        for change in batch.outbox where change.entry.state == .sent && change.previousState != .sent {
            events.append(DeliveryEvent(
                message: change.entry.message, conversation: change.message?.conversation ?? change.entry.conversation,
                recipient: nil, kind: .sent))
        }
        for change in batch.changes.messages {
            guard let snapshot = change.snapshot, snapshot.sender == localUser else { continue }
            let before: [UserID: RecipientStatus]
            switch (change.kind, change.property, change.oldValue) {
            case (.create, _, _): before = [:]
            case (.update, .recipientStatus?, .statuses(let old)): before = old
            default: continue
            }
            for (user, status) in snapshot.recipientStatus.sorted(by: { $0.key < $1.key }) {
                let was = before[user] ?? .sent
                guard status != was else { continue }
                func event(_ kind: Kind) -> DeliveryEvent {
                    DeliveryEvent(message: snapshot.id, conversation: snapshot.conversation, recipient: user, kind: kind)
                }
                switch status {
                case .delivered where was < .delivered:
                    events.append(event(.delivered))
                case .read where was < .read:
                    if was < .delivered { events.append(event(.delivered)) }
                    events.append(event(.read))
                case .failed:
                    events.append(event(.failed(reason: snapshot.failureReasons[user] ?? "")))
                default:
                    break
                }
            }
        }
        return events
    }
}

/// The delivery events of the local user's messages, derived from the store's change stream
/// from the moment it was made. A consumer that falls more than `Store.changeBufferLimit`
/// commits behind loses the oldest (re-read the messages' statuses then).
public struct DeliveryEventStream: AsyncSequence, Sendable {
    public typealias Element = DeliveryEvent
    public typealias Failure = Never

    let base: ChangeStream
    let localUser: UserID

    public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), localUser: localUser) }

    public struct Iterator: AsyncIteratorProtocol {
        var base: ChangeStream.Iterator
        let localUser: UserID
        /// Events of the last batch not yet handed out.
        var waiting: [DeliveryEvent] = []

        public mutating func next() async -> DeliveryEvent? {
            while waiting.isEmpty {
                guard let batch = await base.next() else { return nil }
                waiting = DeliveryEvent.events(in: batch, localUser: localUser).reversed()
            }
            return waiting.popLast()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> DeliveryEvent? {
            while waiting.isEmpty {
                guard let batch = await base.next(isolation: actor) else { return nil }
                waiting = DeliveryEvent.events(in: batch, localUser: localUser).reversed()
            }
            return waiting.popLast()
        }
    }
}
