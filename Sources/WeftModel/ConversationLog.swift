import WeftCrypto

/// One conversation's operations and the state they imply, for a single conversation
/// identifier (a merge group of distinct conversations is several logs; see `Replica`).
///
/// Every rule here judges an operation only by the operation and its causal past, which every
/// replica holding it also holds; so every replica accepts and rejects the same operations, and
/// the state, built from commutative pieces, is the same whatever the order of arrival.
struct ConversationLog: Sendable {
    struct Creation: Sendable {
        var operation: OperationID
        var author: UserID
        var timestamp: HLCTimestamp
        var participants: [UserID]
        var distinct: Bool
        var generation: UInt32
    }

    /// What an accepted operation leaves behind for later checks.
    struct Accepted: Sendable {
        var author: UserID
        var sequence: UInt64
        var timestamp: HLCTimestamp
        var clock: VersionVector
        var isMessage: Bool
    }

    struct MembershipEvent: Hashable, Sendable {
        var author: UserID
        var sequence: UInt64
        var clock: VersionVector
    }

    struct Message: Sendable {
        var id: OperationID
        var sender: UserID
        var timestamp: HLCTimestamp
        var parts: [MessagePart]
        var options: MessageOptions
        var clock: VersionVector
    }

    struct MetadataValue: Sendable {
        var value: String?
        var timestamp: HLCTimestamp
        var author: UserID
        var operation: OperationID
    }

    let id: ConversationID
    private(set) var creation: Creation?
    private(set) var accepted: [OperationID: Accepted] = [:]
    private(set) var rejected: [OperationID: OperationError] = [:]
    /// Accepted operations in an order that respects causality: replaying it rebuilds the log.
    private(set) var order: [SignedOperation] = []
    private(set) var heads: Set<OperationID> = []
    /// The join of every accepted operation's clock: the log's whole past.
    private(set) var frontier = VersionVector()
    /// (author, sequence) slots, to catch an author signing two operations for one slot.
    private var slots: [UserID: [UInt64: OperationID]] = [:]
    /// Slots an author used twice: every operation in them, and all that follow, are refused.
    private(set) var forkedSlots: [UserID: UInt64] = [:]

    private(set) var adds: [UserID: [MembershipEvent]] = [:]
    private(set) var removes: [UserID: [MembershipEvent]] = [:]
    private(set) var hadMembershipChange = false
    private(set) var metadata: [String: MetadataValue] = [:]
    private(set) var messages: [OperationID: Message] = [:]
    private(set) var deleted: Set<OperationID> = []
    private(set) var delivered: [OperationID: Set<UserID>] = [:]
    private(set) var read: [OperationID: Set<UserID>] = [:]
    private(set) var watermarks: [UserID: VersionVector] = [:]

    init(id: ConversationID) { self.id = id }

    // MARK: - Applying

    enum Outcome: Sendable {
        case accepted
        case duplicate
        /// Causes are missing: keep the operation until they arrive.
        case pending(missing: [OperationID])
        case rejected(OperationError)
        /// The author forked a slot: the log must be rebuilt without that slot.
        case fork
    }

    /// Checks and applies one operation whose signature was already verified.
    mutating func apply(_ signed: SignedOperation) -> Outcome {
        let op = signed.operation
        if accepted[signed.id] != nil { return .duplicate }
        if let reason = rejected[signed.id] { return .rejected(reason) }

        // Causes first: an operation is judged against its whole causal past.
        var missing: [OperationID] = []
        var past = VersionVector()
        var latestCause = HLCTimestamp(rawValue: 0)
        for cause in op.causes {
            if let reason = rejected[cause] {
                return reject(signed, OperationError(.dependsOnRejected, "it follows operation \(cause), which was refused (\(reason))"))
            }
            guard let record = accepted[cause] else {
                missing.append(cause)
                continue
            }
            past.formJoin(record.clock)
            latestCause = max(latestCause, record.timestamp)
        }
        if !missing.isEmpty { return .pending(missing: missing) }

        if let forked = forkedSlots[op.author], op.sequence >= forked {
            return reject(signed, OperationError(.equivocation, "its author signed two operations for sequence number \(forked)"))
        }
        if let error = check(signed, past: past, latestCause: latestCause) { return reject(signed, error) }

        // Equivocation: the same author and sequence number for a different operation.
        if let other = slots[op.author]?[op.sequence], other != signed.id {
            forkedSlots[op.author] = min(forkedSlots[op.author] ?? .max, op.sequence)
            return .fork
        }

        var clock = past
        clock.record(op.author, op.sequence)
        accepted[signed.id] = Accepted(
            author: op.author, sequence: op.sequence, timestamp: op.timestamp, clock: clock,
            isMessage: { if case .postMessage = op.body { true } else { false } }())
        slots[op.author, default: [:]][op.sequence] = signed.id
        order.append(signed)
        heads.subtract(op.causes)
        heads.insert(signed.id)
        frontier.formJoin(clock)
        effect(of: signed, clock: clock)
        return .accepted
    }

    private mutating func reject(_ signed: SignedOperation, _ error: OperationError) -> Outcome {
        rejected[signed.id] = error
        return .rejected(error)
    }

    /// The validity rules of SPEC.md §13.1, in order; nil when the operation is acceptable.
    private func check(_ signed: SignedOperation, past: VersionVector, latestCause: HLCTimestamp) -> OperationError? {
        let op = signed.operation
        if case .createConversation(let participants, _, _, _) = op.body {
            guard creation == nil else {
                return OperationError(.conflictingCreation, "conversation \(id) is already created")
            }
            guard op.conversation == ConversationLog.derivedID(of: op) else {
                return OperationError(.conflictingCreation, "the conversation identifier is not derived from its creation")
            }
            guard op.sequence == 1, op.causes.isEmpty else {
                return OperationError(.impossibleSequence, "a creation must be its author's first operation, with no causes")
            }
            guard participants.contains(op.author) else {
                return OperationError(.notAParticipant, "the creator is not among the participants")
            }
            return nil
        }
        guard creation != nil, !op.causes.isEmpty else {
            return OperationError(.impossibleSequence, "an operation other than a creation must follow the creation")
        }
        guard op.sequence == past[op.author] + 1 else {
            return OperationError(
                .impossibleSequence,
                "sequence number \(op.sequence) does not follow the author's previous \(past[op.author]) in its causal past")
        }
        guard op.timestamp > latestCause else {
            return OperationError(.timestampNotAfterCauses, "its timestamp \(op.timestamp) is not after its causes' \(latestCause)")
        }
        guard isParticipant(op.author, at: past) else {
            return OperationError(.notAParticipant, "\(op.author) was not a participant at the operation's causal point")
        }
        switch op.body {
        case .createConversation:
            preconditionFailure("handled above")
        case .addParticipants, .removeParticipants, .setMetadata, .postMessage, .markAllRead:
            return nil
        case .delivered(let ids), .read(let ids):
            for message in ids {
                guard let record = accepted[message], record.isMessage, past.includes(author: record.author, sequence: record.sequence) else {
                    return OperationError(.invalidReference, "receipt for \(message), which is not a message in its causal past")
                }
                guard record.author != op.author else {
                    return OperationError(.notPermitted, "a receipt by the sender of message \(message)")
                }
            }
            return nil
        case .deleteMessage(let message):
            guard let record = accepted[message], record.isMessage, past.includes(author: record.author, sequence: record.sequence) else {
                return OperationError(.invalidReference, "deletes \(message), which is not a message in its causal past")
            }
            guard record.author == op.author else {
                return OperationError(.notPermitted, "only the sender may delete message \(message)")
            }
            return nil
        }
    }

    private mutating func effect(of signed: SignedOperation, clock: VersionVector) {
        let op = signed.operation
        let event = MembershipEvent(author: op.author, sequence: op.sequence, clock: clock)
        switch op.body {
        case .createConversation(let participants, let distinct, let generation, let entries):
            creation = Creation(
                operation: signed.id, author: op.author, timestamp: op.timestamp, participants: participants,
                distinct: distinct, generation: generation)
            for user in participants { adds[user, default: []].append(event) }
            for (key, value) in entries {
                setMetadata(key, MetadataValue(value: value, timestamp: op.timestamp, author: op.author, operation: signed.id))
            }
        case .addParticipants(let users):
            hadMembershipChange = true
            for user in users { adds[user, default: []].append(event) }
        case .removeParticipants(let users):
            hadMembershipChange = true
            for user in users { removes[user, default: []].append(event) }
        case .setMetadata(let entries):
            for (key, value) in entries {
                setMetadata(key, MetadataValue(value: value, timestamp: op.timestamp, author: op.author, operation: signed.id))
            }
        case .postMessage(let parts, let options):
            messages[signed.id] = Message(
                id: signed.id, sender: op.author, timestamp: op.timestamp, parts: parts, options: options, clock: clock)
        case .delivered(let ids):
            for message in ids { delivered[message, default: []].insert(op.author) }
        case .read(let ids):
            for message in ids { read[message, default: []].insert(op.author) }
        case .markAllRead:
            watermarks[op.author, default: VersionVector()].formJoin(clock)
        case .deleteMessage(let message):
            deleted.insert(message)
        }
    }

    private mutating func setMetadata(_ key: String, _ candidate: MetadataValue) {
        if let current = metadata[key], !Self.lastWriterWins(candidate, over: current) { return }
        metadata[key] = candidate
    }

    /// Last writer wins per key, ordered by (timestamp, author), then the operation identifier.
    static func lastWriterWins(_ a: MetadataValue, over b: MetadataValue) -> Bool {
        if a.timestamp != b.timestamp { return a.timestamp > b.timestamp }
        if a.author != b.author { return b.author < a.author }
        return b.operation < a.operation
    }

    // MARK: - Membership

    /// Remove wins: `user` is a participant in the past `clock` describes when some add (or the
    /// creation) of `user` in that past follows every removal of `user` in that past. A removal
    /// concurrent with an add therefore wins, and only an add made after seeing the removal
    /// brings the user back (SPEC.md §13.3).
    func isParticipant(_ user: UserID, at clock: VersionVector) -> Bool {
        let inPast = { (event: MembershipEvent) in clock.includes(author: event.author, sequence: event.sequence) }
        let pastRemoves = (removes[user] ?? []).filter(inPast)
        return (adds[user] ?? []).contains { add in
            inPast(add) && pastRemoves.allSatisfy { add.clock.includes(author: $0.author, sequence: $0.sequence) }
        }
    }

    /// Every user named in this log's membership history.
    var everyone: Set<UserID> { Set(adds.keys).union(removes.keys) }

    /// A conversation's identifier: the first 16 bytes of BLAKE2b-256 of `"weft conversation v1"`
    /// and its creation's encoding with the conversation field zeroed (SPEC.md §12.2). Deriving
    /// it means one identifier can never name two different creations.
    static func derivedID(of creation: Operation) -> ConversationID {
        var blank = creation
        blank.conversation = ConversationID(bytes: [UInt8](repeating: 0, count: ConversationID.byteCount))!
        let digest = BLAKE2b.hash(Array("weft conversation v1".utf8), blank.encoded(), outputByteCount: 32)
        return ConversationID(bytes: Array(digest.prefix(ConversationID.byteCount)))!
    }
}

extension ConversationLog {
    /// The same log rebuilt from its accepted operations, with the forked slots refused: the
    /// operations in them and everything that follows them are rejected.
    func rebuiltWithoutForks() -> ConversationLog {
        var rebuilt = ConversationLog(id: id)
        rebuilt.forkedSlots = forkedSlots
        for op in order { _ = rebuilt.apply(op) }
        return rebuilt
    }
}
