import WeftCrypto

/// One conversation's operations and the state they imply, for a single conversation
/// identifier (a merge group of distinct conversations is several logs; see `Replica`).
///
/// Every rule here judges an operation only by the operation and its causal past, which every
/// replica holding it also holds; so every replica accepts and rejects the same operations, and
/// the state, built from commutative pieces, is the same whatever the order of arrival.
///
/// Two tiers keep equivocation (SPEC.md §13.1) a function of the set too. An operation that
/// passes every rule but equivocation is *well-formed*: that is judged once, from its causal
/// past of well-formed operations, and never revised. Slots (author, sequence) holding two or
/// more well-formed operations are taken in order of their earliest operation; one is *forked*
/// if two of its operations are not already tainted by a slot forked before it. A well-formed
/// operation is *accepted* unless its causal past (itself included) reaches a forked slot. So
/// an honest author whose operation a fork tainted may use that sequence number again. When
/// the forked slots change, the state is rebuilt from the untainted operations.
struct ConversationLog: Sendable {
    struct Creation: Sendable {
        var operation: OperationID
        var author: UserID
        var timestamp: HLCTimestamp
        var participants: [UserID]
        var distinct: Bool
        var generation: UInt32
    }

    /// What a well-formed operation leaves behind for later checks.
    struct Record: Sendable {
        var author: UserID
        var sequence: UInt64
        var timestamp: HLCTimestamp
        var clock: VersionVector
        var isMessage: Bool
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
        /// The key exactly as written (keys that are canonically equivalent are one key).
        var key: String
        var value: String?
        var timestamp: HLCTimestamp
        var author: UserID
        var operation: OperationID
    }

    /// A well-formed operation as replaying its effect needs it: without its signature and
    /// encoding, and (when the log keeps no bodies) without its message parts.
    struct Entry: Sendable {
        var id: OperationID
        var operation: Operation
    }

    let id: ConversationID
    /// Whether messages keep their parts. A store's partial replica keeps none (the parts stay
    /// in SQLite, and its snapshots carry none); a complete replica does.
    let keepsBodies: Bool

    init(id: ConversationID, keepsBodies: Bool = true) {
        self.id = id
        self.keepsBodies = keepsBodies
    }

    // MARK: Well-formed operations: judged once, never revised

    private(set) var creation: Creation?
    /// Every well-formed operation, accepted or tainted by a fork.
    private(set) var records: [OperationID: Record] = [:]
    /// Operations refused for a reason other than a fork.
    private(set) var rejected: [OperationID: OperationError] = [:]
    /// Well-formed operations in an order that respects causality: replaying it rebuilds the state.
    private(set) var order: [Entry] = []
    /// The well-formed operations in each (author, sequence) slot.
    private var slots: [UserID: [UInt64: [OperationID]]] = [:]
    /// Slots holding more than one well-formed operation: the candidates for a fork.
    private var sharedSlots: Set<Slot> = []
    /// For each author who forked, the lowest forked sequence number: every operation whose
    /// causal past reaches it is refused.
    private(set) var forkedSlots: [UserID: UInt64] = [:]

    struct Slot: Hashable, Sendable {
        var author: UserID
        var sequence: UInt64
    }
    /// Membership events of every well-formed operation: what "participant at its causal point"
    /// is judged on. Filtered by a clock, they give the accepted events of that past.
    private(set) var adds: [UserID: [MembershipEvent]] = [:]
    private(set) var removes: [UserID: [MembershipEvent]] = [:]

    // MARK: State: the effects of the accepted operations

    private(set) var heads: Set<OperationID> = []
    /// The join of every accepted operation's clock: the accepted log's whole past.
    private(set) var frontier = VersionVector()
    private(set) var hadMembershipChange = false
    /// Users an accepted creation, add or removal names, and those of them who are participants
    /// now (at `frontier`). Only an operation naming a user can change whether they are.
    private(set) var named: Set<UserID> = []
    private(set) var participants: Set<UserID> = []
    private(set) var metadata: [String: MetadataValue] = [:]
    private(set) var messages: [OperationID: Message] = [:]
    private(set) var deleted: Set<OperationID> = []
    /// The live messages (in `messages`, not `deleted`) in their order (SPEC.md §13.5), for
    /// positions in O(log n) (`ConversationLog+Order.swift`).
    private(set) var messageOrder = MessageOrder()
    private(set) var delivered: [OperationID: Set<UserID>] = [:]
    private(set) var read: [OperationID: Set<UserID>] = [:]
    private(set) var watermarks: [UserID: VersionVector] = [:]

    // MARK: - Accepted and refused

    /// Whether a past reaches a forked slot.
    func isTainted(_ clock: VersionVector) -> Bool {
        forkedSlots.contains { author, sequence in clock[author] >= sequence }
    }

    func isAccepted(_ id: OperationID) -> Bool {
        guard let record = records[id] else { return false }
        return !isTainted(record.clock)
    }

    /// Operations the log holds: well-formed ones and those refused by a rule.
    var operationCount: Int { records.count + rejected.count }

    var acceptedIDs: [OperationID] { records.compactMap { isTainted($0.value.clock) ? nil : $0.key } }

    /// Refused operations: those that broke a rule, and those a fork taints.
    var refusedIDs: [OperationID] { Array(rejected.keys) + records.compactMap { isTainted($0.value.clock) ? $0.key : nil } }

    static func equivocationError(_ author: UserID, _ sequence: UInt64) -> OperationError {
        OperationError(.equivocation, "it follows sequence number \(sequence) of \(author), who signed two operations for it")
    }

    private func taintError(_ clock: VersionVector) -> OperationError {
        // Asked only of a tainted clock, which reaches some forked slot.
        guard let (author, sequence) = forkedSlots.first(where: { clock[$0.key] >= $0.value }) else {
            return OperationError(.equivocation, "it follows a sequence number its author signed twice")
        }
        return Self.equivocationError(author, sequence)
    }

    // MARK: - Applying

    enum Outcome: Sendable {
        case accepted
        case duplicate
        /// Causes are missing: keep the operation until they arrive.
        case pending(missing: [OperationID])
        case rejected(OperationError)
        /// The operation shares a slot with another, and the forked slots changed: `accepted`
        /// are accepted now and were not before (the operation itself, if it is accepted);
        /// `revoked` were accepted and are refused now.
        case reforked(accepted: [OperationID], revoked: [OperationID])
    }

    /// Checks and applies one operation whose signature was already verified.
    mutating func apply(_ signed: SignedOperation) -> Outcome {
        let op = signed.operation
        if let record = records[signed.id] {
            return isTainted(record.clock) ? .rejected(taintError(record.clock)) : .duplicate
        }
        if let reason = rejected[signed.id] { return .rejected(reason) }
        if let error = op.structuralError(encodedByteCount: signed.encoding.count) { return reject(signed, error) }
        // A creation's causes could never arrive (they would have to follow it): refuse it now
        // rather than hold it for ever.
        if case .createConversation = op.body, !op.causes.isEmpty {
            return reject(signed, OperationError(.impossibleSequence, "a creation must be its author's first operation, with no causes"))
        }

        // Causes first: an operation is judged against its whole causal past.
        var missing: [OperationID] = []
        var past = VersionVector()
        var latestCause = HLCTimestamp(rawValue: 0)
        for cause in op.causes {
            if let reason = rejected[cause] {
                return reject(signed, OperationError(.dependsOnRejected, "it follows operation \(cause), which was refused (\(reason))"))
            }
            guard let record = records[cause] else {
                missing.append(cause)
                continue
            }
            past.formJoin(record.clock)
            latestCause = max(latestCause, record.timestamp)
        }
        if !missing.isEmpty { return .pending(missing: missing) }
        if let error = check(signed, past: past, latestCause: latestCause) { return reject(signed, error) }

        // Well-formed: recorded for good, whatever forks say.
        var clock = past
        clock.record(op.author, op.sequence)
        records[signed.id] = Record(
            author: op.author, sequence: op.sequence, timestamp: op.timestamp, clock: clock,
            isMessage: { if case .postMessage = op.body { true } else { false } }())
        var kept = op
        if !keepsBodies, case .postMessage(_, let options) = op.body { kept.body = .postMessage(parts: [], options: options) }
        order.append(Entry(id: signed.id, operation: kept))
        recordMembership(of: signed, clock: clock)

        // Equivocation: the same author and sequence number for another operation.
        slots[op.author, default: [:]][op.sequence, default: []].append(signed.id)
        if slots[op.author]?[op.sequence]?.count ?? 0 > 1 {
            sharedSlots.insert(Slot(author: op.author, sequence: op.sequence))
            let before = Set(acceptedIDs.filter { $0 != signed.id })
            let forks = Self.forks(among: sharedSlots, slots: slots, records: records)
            if forks != forkedSlots {
                forkedSlots = forks
                rebuildState()
                let after = Set(acceptedIDs)
                return .reforked(accepted: after.subtracting(before).sorted(), revoked: before.subtracting(after).sorted())
            }
        }
        if isTainted(clock) { return .rejected(taintError(clock)) }
        effect(of: order[order.count - 1], clock: clock)
        return .accepted
    }

    /// The forked slots (lowest per author): shared slots in order of their earliest operation
    /// (timestamp, then author, then sequence), each forked when two of its operations are not
    /// tainted by a slot forked before it.
    static func forks(
        among shared: Set<Slot>, slots: [UserID: [UInt64: [OperationID]]], records: [OperationID: Record]
    ) -> [UserID: UInt64] {
        let ordered = shared.map { slot in
            (slot, (slots[slot.author]?[slot.sequence] ?? []).compactMap { records[$0]?.timestamp }.min() ?? HLCTimestamp(milliseconds: 0, counter: 0))
        }.sorted { a, b in
            if a.1 != b.1 { return a.1 < b.1 }
            if a.0.author != b.0.author { return a.0.author < b.0.author }
            return a.0.sequence < b.0.sequence
        }
        var forked: [UserID: UInt64] = [:]
        for (slot, _) in ordered {
            let untainted = (slots[slot.author]?[slot.sequence] ?? []).filter { id in
                guard let clock = records[id]?.clock else { return false }
                return !forked.contains { author, sequence in clock[author] >= sequence }
            }
            if untainted.count > 1 { forked[slot.author] = min(forked[slot.author] ?? .max, slot.sequence) }
        }
        return forked
    }

    private mutating func reject(_ signed: SignedOperation, _ error: OperationError) -> Outcome {
        rejected[signed.id] = error
        return .rejected(error)
    }

    /// The validity rules of SPEC.md §13.1 but equivocation, in order; nil when the operation
    /// is well-formed.
    private func check(_ signed: SignedOperation, past: VersionVector, latestCause: HLCTimestamp) -> OperationError? {
        let op = signed.operation
        if case .createConversation(let participants, _, _, _) = op.body {
            guard creation == nil else {
                return OperationError(.conflictingCreation, "conversation \(id) is already created")
            }
            guard op.conversation == ConversationLog.derivedID(ofEncoding: signed.encoding) else {
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
            return OperationError(.notAParticipant, "its author was not a participant at its causal point")
        }
        switch op.body {
        case .createConversation:
            preconditionFailure("handled above")
        case .addParticipants, .removeParticipants, .setMetadata, .postMessage, .markAllRead:
            return nil
        case .delivered(let ids), .read(let ids):
            for message in ids {
                guard let record = records[message], record.isMessage, past.includes(author: record.author, sequence: record.sequence) else {
                    return OperationError(.invalidReference, "receipt for \(message), which is not a message in its causal past")
                }
                guard record.author != op.author else {
                    return OperationError(.notPermitted, "a receipt by the sender of message \(message)")
                }
            }
            return nil
        case .deleteMessage(let message):
            guard let record = records[message], record.isMessage, past.includes(author: record.author, sequence: record.sequence) else {
                return OperationError(.invalidReference, "deletes \(message), which is not a message in its causal past")
            }
            guard record.author == op.author else {
                return OperationError(.notPermitted, "only the sender may delete message \(message)")
            }
            return nil
        }
    }

    /// The creation and the membership events of a well-formed operation.
    private mutating func recordMembership(of signed: SignedOperation, clock: VersionVector) {
        let op = signed.operation
        let event = MembershipEvent(author: op.author, sequence: op.sequence, clock: clock)
        switch op.body {
        case .createConversation(let participants, _, _, _):
            creation = Self.creation(of: signed)
            for user in participants { adds[user, default: []].append(event) }
        case .addParticipants(let users):
            for user in users { adds[user, default: []].append(event) }
        case .removeParticipants(let users):
            for user in users { removes[user, default: []].append(event) }
        default:
            break
        }
    }

    /// What a creation tells merge groups and lookups; nil for any other operation.
    static func creation(of signed: SignedOperation) -> Creation? {
        let op = signed.operation
        guard case .createConversation(let participants, let distinct, let generation, _) = op.body else { return nil }
        return Creation(
            operation: signed.id, author: op.author, timestamp: op.timestamp, participants: participants,
            distinct: distinct, generation: generation)
    }

    /// What an accepted operation changes in the state.
    private mutating func effect(of entry: Entry, clock: VersionVector) {
        let op = entry.operation
        heads.subtract(op.causes)
        heads.insert(entry.id)
        frontier.formJoin(clock)
        switch op.body {
        case .createConversation(let users, _, _, _), .addParticipants(let users), .removeParticipants(let users):
            for user in users {
                named.insert(user)
                if isParticipant(user, at: frontier) { participants.insert(user) } else { participants.remove(user) }
            }
        default:
            break
        }
        switch op.body {
        case .createConversation(_, _, _, let entries):
            for (key, value) in entries {
                setMetadata(MetadataValue(key: key, value: value, timestamp: op.timestamp, author: op.author, operation: entry.id))
            }
        case .addParticipants, .removeParticipants:
            hadMembershipChange = true
        case .setMetadata(let entries):
            for (key, value) in entries {
                setMetadata(MetadataValue(key: key, value: value, timestamp: op.timestamp, author: op.author, operation: entry.id))
            }
        case .postMessage(let parts, let options):
            messages[entry.id] = Message(
                id: entry.id, sender: op.author, timestamp: op.timestamp, parts: parts, options: options, clock: clock)
            if !deleted.contains(entry.id) { messageOrder.insert(MessageOrder.Key(op.timestamp, op.author, entry.id)) }
        case .delivered(let ids):
            for message in ids { delivered[message, default: []].insert(op.author) }
        case .read(let ids):
            for message in ids { read[message, default: []].insert(op.author) }
        case .markAllRead:
            watermarks[op.author, default: VersionVector()].formJoin(clock)
        case .deleteMessage(let message):
            if deleted.insert(message).inserted, let gone = messages[message] {
                messageOrder.remove(MessageOrder.Key(gone.timestamp, gone.sender, gone.id))
            }
        }
    }

    /// Replays the accepted operations' effects after a fork tainted some of them.
    private mutating func rebuildState() {
        heads = []
        frontier = VersionVector()
        hadMembershipChange = false
        named = []
        participants = []
        metadata = [:]
        messages = [:]
        deleted = []
        messageOrder = MessageOrder()
        delivered = [:]
        read = [:]
        watermarks = [:]
        for entry in order {
            // Every entry of the order has its record (both are written together, in `apply`).
            guard let clock = records[entry.id]?.clock else { continue }
            if !isTainted(clock) { effect(of: entry, clock: clock) }
        }
    }

    private mutating func setMetadata(_ candidate: MetadataValue) {
        if let current = metadata[candidate.key], !Self.lastWriterWins(candidate, over: current) { return }
        metadata[candidate.key] = candidate
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
        MembershipEvent.isParticipant(adds: adds[user] ?? [], removes: removes[user] ?? [], at: clock)
    }

    /// A conversation's identifier: the first 16 bytes of BLAKE2b-256 of `"weft conversation v1"`
    /// and its creation's encoding with the conversation field zeroed (SPEC.md §12.2). Deriving
    /// it means one identifier can never name two different creations.
    static let conversationDomain = Array("weft conversation v1".utf8)

    static func derivedID(of creation: Operation) -> ConversationID {
        derivedID(ofEncoding: creation.encoded())
    }

    /// The same from the creation's encoding: the conversation field is at a fixed offset.
    static func derivedID(ofEncoding encoding: [UInt8]) -> ConversationID {
        var blank = conversationDomain + encoding
        let offset = conversationDomain.count + conversationFieldOffset
        blank.replaceSubrange(offset..<(offset + ConversationID.byteCount), with: repeatElement(0, count: ConversationID.byteCount))
        let digest = BLAKE2b.hash(blank, outputByteCount: 32)
        return ConversationID(bytes: Array(digest.prefix(ConversationID.byteCount)))!
    }

    /// Where the conversation field starts in an encoding: after version, kind and author.
    static let conversationFieldOffset = 1 + 1 + PublicIdentity.byteCount
}
