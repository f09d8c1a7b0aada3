import WeftCrypto

/// The local user writing operations: picks causes, sequence numbers and timestamps from a
/// replica's state, and signs. Sans-I/O: the caller passes the wall clock reading.
public struct Author: Sendable {
    public let identity: NodeIdentity
    public private(set) var clock: HybridLogicalClock

    public init(identity: NodeIdentity, clock: HybridLogicalClock = HybridLogicalClock()) {
        self.identity = identity
        self.clock = clock
    }

    public var user: UserID { identity.publicKey }

    /// A creation for `others` plus this author. A distinct creation joins the current
    /// generation for that participant set, so concurrent creations merge (§13.2).
    public mutating func createConversation(
        with others: Set<UserID>, distinct: Bool = true, metadata: [String: String] = [:],
        in replica: Replica, wallMilliseconds: UInt64
    ) -> SignedOperation {
        let participants = others.union([user])
        let generation = distinct ? replica.generation(forDistinct: participants) : 0
        var op = Operation(
            author: user, conversation: ConversationID(bytes: [UInt8](repeating: 0, count: ConversationID.byteCount))!,
            sequence: 1, timestamp: clock.tick(wallMilliseconds: wallMilliseconds), causes: [],
            body: .createConversation(
                participants: participants.sorted(), distinct: distinct, generation: generation, metadata: metadata))
        op.conversation = ConversationLog.derivedID(of: op)
        return SignedOperation(signing: op, with: identity)
    }

    /// Any other operation, in the log of `conversation` (not its canonical: callers choose).
    public mutating func write(
        _ body: OperationBody, in conversation: ConversationID, replica: Replica, wallMilliseconds: UInt64
    ) -> SignedOperation {
        if let latest = replica.latestTimestamp(in: conversation) { clock.observe(latest) }
        let op = Operation(
            author: user, conversation: conversation, sequence: replica.nextSequence(for: user, in: conversation),
            timestamp: clock.tick(wallMilliseconds: wallMilliseconds), causes: replica.causes(forNextOf: user, in: conversation), body: body)
        return SignedOperation(signing: op, with: identity)
    }

    /// Several operations in the log of `conversation`, written before any is applied: the
    /// first as `write` makes it, each next one the next in this author's chain, caused by
    /// the one before (which is then the log's only head), so applying them in order accepts
    /// them all. A store commits a group of posts this way in one transaction.
    public mutating func write(
        _ bodies: [OperationBody], in conversation: ConversationID, replica: Replica, wallMilliseconds: UInt64
    ) -> [SignedOperation] {
        guard let first = bodies.first else { return [] }
        var written = [write(first, in: conversation, replica: replica, wallMilliseconds: wallMilliseconds)]
        for body in bodies.dropFirst() {
            let previous = written[written.count - 1]
            let op = Operation(
                author: user, conversation: conversation, sequence: previous.operation.sequence + 1,
                timestamp: clock.tick(wallMilliseconds: wallMilliseconds), causes: [previous.id], body: body)
            written.append(SignedOperation(signing: op, with: identity))
        }
        return written
    }
}
