import WeftCrypto
@testable import WeftModel

/// Identities made once for the whole target, from fixed seeds: every test sees the same users,
/// so a failure reproduces, and nothing pays for key generation per case.
enum Fixtures {
    static let identities: [NodeIdentity] = (0..<8).map { index in
        NodeIdentity(seed: SecureBytes(copying: [UInt8](repeating: UInt8(index + 1), count: NodeIdentity.seedByteCount)))
    }
    static let users: [UserID] = identities.map(\.publicKey)

    static func author(_ index: Int) -> Author { Author(identity: identities[index]) }

    static func text(_ text: String) -> OperationBody {
        .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(text.utf8))], options: MessageOptions())
    }
}

/// The seeded generator (WeftCrypto.SplitMix64), so every random schedule replays from its seed.
typealias SeededGenerator = SplitMix64

extension SplitMix64 {
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
}

extension Replica {
    /// Applies operations one at a time, in the given order (as a node receiving them one by one would).
    @discardableResult
    mutating func applyEach(_ operations: [SignedOperation]) -> [Report] {
        operations.map { apply(verified: [$0]) }
    }
}

/// Everything a replica shows that must be equal on every replica holding the same operations.
/// `unreadCount` is left out: it describes the local user (see `expectedUnreadCount`).
struct ReplicaDigest: Equatable {
    var conversationIDs: [ConversationID]
    var conversations: [ConversationSnapshot]
    var messages: [[MessageSnapshot]]
    /// Every conversation identifier the replica has a creation for, and what it resolves to.
    var lookups: [ConversationID: ConversationID]
    var accepted: Set<OperationID>
    var rejected: Set<OperationID>
    var pendingCount: Int

    init(_ replica: Replica) {
        conversationIDs = replica.conversationIDs
        conversations = conversationIDs.map { id in
            var snapshot = replica.conversation(id)!
            snapshot.unreadCount = 0
            return snapshot
        }
        messages = conversationIDs.map { replica.messages(in: $0) }
        var lookups: [ConversationID: ConversationID] = [:]
        for (id, log) in replica.logs where log.creation != nil { lookups[id] = replica.conversation(id)?.id }
        self.lookups = lookups
        accepted = replica.acceptedOperations
        rejected = replica.rejectedOperations
        pendingCount = replica.pendingCount
    }

    /// The first field that differs, for a readable failure.
    func firstDifference(from other: ReplicaDigest) -> String? {
        if conversationIDs != other.conversationIDs { return "conversationIDs: \(conversationIDs) vs \(other.conversationIDs)" }
        for (a, b) in zip(conversations, other.conversations) where a != b {
            return "conversation \(a.id):\n  \(a)\n  \(b)"
        }
        for (a, b) in zip(messages, other.messages) where a != b {
            if a.map(\.id) != b.map(\.id) { return "message order: \(a.map(\.id)) vs \(b.map(\.id))" }
            for (x, y) in zip(a, b) where x != y { return "message \(x.id):\n  \(x)\n  \(y)" }
        }
        if lookups != other.lookups { return "lookups: \(lookups) vs \(other.lookups)" }
        if accepted != other.accepted {
            return "accepted differ: only here \(accepted.subtracting(other.accepted)), only there \(other.accepted.subtracting(accepted))"
        }
        if rejected != other.rejected {
            return "rejected differ: only here \(rejected.subtracting(other.rejected)), only there \(other.rejected.subtracting(rejected))"
        }
        if pendingCount != other.pendingCount { return "pending: \(pendingCount) vs \(other.pendingCount)" }
        return nil
    }
}

/// One user on one node, for hand-written scenarios: writes from its own replica's view, and
/// receives what the test hands it.
struct Peer {
    var author: Author
    var replica: Replica
    /// The wall clock: each write moves it on by one millisecond unless the test sets it.
    var wall: UInt64 = 10_000
    private(set) var lastReport = Replica.Report()
    /// Every operation written here or handed to this peer, in that order.
    private(set) var given: [SignedOperation] = []

    init(_ index: Int) {
        author = Fixtures.author(index)
        replica = Replica(localUser: Fixtures.users[index])
    }

    var user: UserID { author.user }

    @discardableResult
    mutating func create(with others: [UserID], distinct: Bool = true, metadata: [String: String] = [:]) -> SignedOperation {
        wall += 1
        let op = author.createConversation(with: Set(others), distinct: distinct, metadata: metadata, in: replica, wallMilliseconds: wall)
        lastReport = replica.apply(verified: [op])
        given.append(op)
        return op
    }

    /// Writes `body` in the log of `conversation` and applies it here.
    @discardableResult
    mutating func write(_ body: OperationBody, in conversation: ConversationID) -> SignedOperation {
        wall += 1
        let op = author.write(body, in: conversation, replica: replica, wallMilliseconds: wall)
        lastReport = replica.apply(verified: [op])
        given.append(op)
        return op
    }

    @discardableResult
    mutating func post(_ text: String, in conversation: ConversationID) -> SignedOperation {
        write(Fixtures.text(text), in: conversation)
    }

    @discardableResult
    mutating func receive(_ operations: [SignedOperation]) -> Replica.Report {
        lastReport = replica.apply(verified: operations)
        given += operations
        return lastReport
    }

    /// The well-formed operations of the log `id` (accepted, or tainted by a fork), as given
    /// to this peer: what a peer syncing the log would send.
    func wellFormed(in id: ConversationID) -> [SignedOperation] {
        given.filter { $0.operation.conversation == id && replica.logs[id]?.records[$0.id] != nil }
    }

    var accepted: Bool { lastReport.accepted.count == 1 && lastReport.rejected.isEmpty }
    var refusal: OperationError.Reason? { lastReport.rejected.first?.1.reason }
}

extension SignedOperation {
    var conversation: ConversationID { operation.conversation }
}

extension Replica {
    /// Texts of the messages of `id`, in conversation order.
    func texts(in id: ConversationID) -> [String] {
        messages(in: id).map { String(decoding: $0.parts[0].data, as: UTF8.self) }
    }
}

/// Signs an operation built field by field, for operations no honest author writes.
func forge(
    _ index: Int, in conversation: ConversationID, sequence: UInt64, timestamp: UInt64, causes: [OperationID],
    _ body: OperationBody
) -> SignedOperation {
    SignedOperation(
        signing: Operation(
            author: Fixtures.users[index], conversation: conversation, sequence: sequence,
            timestamp: HLCTimestamp(rawValue: timestamp), causes: causes, body: body),
        with: Fixtures.identities[index])
}

/// A creation with a derived identifier, built field by field.
func forgeCreation(
    _ index: Int, participants: [UserID], distinct: Bool = true, generation: UInt32 = 1, timestamp: UInt64 = 1 << 32,
    metadata: [String: String] = [:], sequence: UInt64 = 1, causes: [OperationID] = []
) -> SignedOperation {
    var op = Operation(
        author: Fixtures.users[index], conversation: ConversationID(bytes: [UInt8](repeating: 0, count: 16))!,
        sequence: sequence, timestamp: HLCTimestamp(rawValue: timestamp), causes: causes,
        body: .createConversation(participants: participants.sorted(), distinct: distinct, generation: generation, metadata: metadata))
    op.conversation = ConversationLog.derivedID(of: op)
    return SignedOperation(signing: op, with: Fixtures.identities[index])
}
