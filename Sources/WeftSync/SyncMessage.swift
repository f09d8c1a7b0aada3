import NIOCore
import WeftModel
import WeftWire

/// One sync message: the body of a `SyncEnvelope`, decoded (SPEC.md §14.3–§14.8, §14.12, §17.8).
///
/// Sans-I/O: `encode()` gives the DATA payload (type byte included) and `init(payload:)`
/// reads one, refusing anything malformed with a `SyncMessageError` (never a trap).
public enum SyncMessage: Hashable, Sendable {
    /// One round of range-based set reconciliation (§14.3): how nodes reconcile.
    case have(HaveMessage)
    /// Each published log the sender holds, by digest (§14.4). Weft reconciles with HAVE and
    /// sends no SUMMARY; it still answers one, as any valid message.
    case summary(Summary)
    /// What the sender holds of some conversations, asking for what lies beyond it (§14.5).
    case want(Want)
    /// Signed operations (§14.6).
    case operations(Operations)
    /// Operations the sender has stored, by slot: the acknowledgement that makes a message
    /// sent (§14.7). At least one range.
    case stored([SlotRange])
    /// Lazy push: operations the sender holds and did not push (§14.8).
    case ihave([Announcement])
    /// The sender asks to get announcements (IHAVE) instead of operations (§14.8).
    case prune
    /// Display names of users the sender knows (§14.12): 1 to `maxNamesCount` entries. Not
    /// replication: the node's name directory takes it, never the sync core.
    case names([UserName])
    /// Content transfer (§17.8): only between nodes with the *content* feature bit. Not
    /// replication: the node's content service takes it, never the sync core.
    case content(ContentTransferMessage)

    /// The type byte this message travels under.
    public var type: SyncMessageType {
        switch self {
        case .have: .have
        case .summary: .summary
        case .want: .want
        case .operations: .operations
        case .stored: .stored
        case .ihave: .ihave
        case .prune: .prune
        case .names: .names
        case .content(let message): message.type
        }
    }
}

// MARK: - Bodies

extension SyncMessage {
    /// The SUMMARY body (§14.4): one part of the list of published logs the sender holds.
    public struct Summary: Hashable, Sendable {
        /// One log: its identifier, the digest of its operation identifiers, its last activity.
        public struct Entry: Hashable, Sendable {
            public var conversation: ConversationID
            public var digest: SetDigest
            public var lastActivity: HLCTimestamp

            public init(conversation: ConversationID, digest: SetDigest, lastActivity: HLCTimestamp) {
                self.conversation = conversation
                self.digest = digest
                self.lastActivity = lastActivity
            }
        }

        /// Whether this is the last part: the receiver then knows every log the sender holds.
        public var isFinal: Bool
        /// Strictly ascending by conversation.
        public var entries: [Entry]

        public init(isFinal: Bool, entries: [Entry]) {
            self.isFinal = isFinal
            self.entries = entries
        }
    }

    /// The WANT body (§14.5).
    public struct Want: Hashable, Sendable {
        /// One conversation: send me the operations past `beyond` (if present) and these ids.
        public struct Entry: Hashable, Sendable {
            public var conversation: ConversationID
            /// The sender's heads (§14): it asks for every held operation whose sequence is
            /// above its author's entry. Nil asks for nothing by position, only `ids`.
            public var beyond: VersionVector?
            /// Operations asked for by identifier, strictly ascending.
            public var ids: [OperationID]

            public init(conversation: ConversationID, beyond: VersionVector?, ids: [OperationID] = []) {
                self.conversation = conversation
                self.beyond = beyond
                self.ids = ids
            }
        }

        /// The request follows an announcement that did not arrive in time: the receiver
        /// pushes eagerly to the sender again (Plumtree's GRAFT, §14.8).
        public var isGraft: Bool
        /// In the order the sender wants them answered; each conversation at most once.
        public var entries: [Entry]

        public init(isGraft: Bool = false, entries: [Entry]) {
            self.isGraft = isGraft
            self.entries = entries
        }
    }

    /// The OPERATIONS body (§14.6).
    public struct Operations: Hashable, Sendable {
        /// Pushed unasked (eager push, §14.8), as opposed to answering a WANT or publishing a
        /// log: a pushed operation the receiver already holds makes it send PRUNE.
        public var isPush: Bool
        /// At least one.
        public var operations: [SignedOperation]

        public init(isPush: Bool, operations: [SignedOperation]) {
            self.isPush = isPush
            self.operations = operations
        }
    }

    /// One NAMES entry (§14.12): a user and the display name its node gives in its node info.
    public struct UserName: Hashable, Sendable {
        public let user: UserID
        /// At most `WireConstants.maxDisplayNameByteCount` bytes of UTF-8, as in node info.
        public let displayName: String

        /// A longer name is cut to the longest prefix of whole characters that fits (§1).
        public init(user: UserID, displayName: String) {
            self.user = user
            self.displayName = displayName.truncatedToUTF8(WireConstants.maxDisplayNameByteCount)
        }
    }

    /// One IHAVE entry (§14.8): an operation by slot and identifier.
    public struct Announcement: Hashable, Sendable {
        public var conversation: ConversationID
        public var author: UserID
        public var sequence: UInt64
        public var id: OperationID

        public init(conversation: ConversationID, author: UserID, sequence: UInt64, id: OperationID) {
            self.conversation = conversation
            self.author = author
            self.sequence = sequence
            self.id = id
        }

        public init(_ operation: SignedOperation) {
            self.init(
                conversation: operation.operation.conversation, author: operation.operation.author,
                sequence: operation.operation.sequence, id: operation.id)
        }
    }
}
