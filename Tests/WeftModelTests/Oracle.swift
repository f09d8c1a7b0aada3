import WeftCrypto
@testable import WeftModel

/// SPEC.md §13.2–13.6 computed directly from a set of accepted operations and their cause
/// graph, written apart from `Replica` (no version vectors, no incremental state), so the two
/// can check each other. Validity (§13.1) is not recomputed: the accepted set is an input.
struct Oracle {
    typealias Creation = (id: OperationID, op: Operation, participants: [UserID], distinct: Bool, generation: UInt32, metadata: [String: String])

    let operations: [OperationID: SignedOperation]
    let localUser: UserID
    private let byLog: [ConversationID: [SignedOperation]]
    private let creations: [ConversationID: Creation]
    /// Each user's receipts: messages read, messages delivered, and their mark-all-read operations.
    private var reads: [UserID: Set<OperationID>] = [:]
    private var deliveries: [UserID: Set<OperationID>] = [:]
    private var marks: [UserID: [OperationID]] = [:]
    private var ancestorCache: [OperationID: Set<OperationID>] = [:]

    init(accepted: some Sequence<SignedOperation>, localUser: UserID) {
        operations = Dictionary(accepted.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        self.localUser = localUser
        byLog = Dictionary(grouping: operations.values, by: \.operation.conversation)
        var creations: [ConversationID: Creation] = [:]
        for signed in operations.values {
            let author = signed.operation.author
            switch signed.operation.body {
            case .createConversation(let participants, let distinct, let generation, let metadata):
                creations[signed.operation.conversation] = (signed.id, signed.operation, participants.sorted(), distinct, generation, metadata)
            case .read(let ids): reads[author, default: []].formUnion(ids)
            case .delivered(let ids): deliveries[author, default: []].formUnion(ids)
            case .markAllRead: marks[author, default: []].append(signed.id)
            default: break
            }
        }
        self.creations = creations
    }

    /// Every operation reachable through causes (the operation itself excluded).
    mutating func ancestors(of id: OperationID) -> Set<OperationID> {
        if let cached = ancestorCache[id] { return cached }
        var result: Set<OperationID> = []
        for cause in operations[id]?.operation.causes ?? [] {
            result.insert(cause)
            result.formUnion(ancestors(of: cause))
        }
        ancestorCache[id] = result
        return result
    }

    private func ops(in log: ConversationID) -> [SignedOperation] { byLog[log] ?? [] }

    private func creation(of log: ConversationID) -> Creation? { creations[log] }

    /// Remove wins (§13.3): some add of `user` has every removal of `user` in its past.
    mutating func admits(_ user: UserID, in log: ConversationID) -> Bool? {
        var adds: [OperationID] = []
        var removes: [OperationID] = []
        for signed in ops(in: log) {
            switch signed.operation.body {
            case .createConversation(let participants, _, _, _) where participants.contains(user): adds.append(signed.id)
            case .addParticipants(let users) where users.contains(user): adds.append(signed.id)
            case .removeParticipants(let users) where users.contains(user): removes.append(signed.id)
            default: break
            }
        }
        if adds.isEmpty && removes.isEmpty { return nil }
        for add in adds where removes.allSatisfy({ ancestors(of: add).contains($0) }) { return true }
        return false
    }

    /// Merge groups (§13.2), canonical first.
    func groups() -> [[ConversationID]] {
        struct Key: Hashable {
            var participants: [UserID]
            var generation: UInt32
        }
        var byKey: [Key: [ConversationID]] = [:]
        var alone: [[ConversationID]] = []
        for (id, creation) in creations {
            if creation.distinct {
                byKey[Key(participants: creation.participants, generation: creation.generation), default: []].append(id)
            } else {
                alone.append([id])
            }
        }
        return (Array(byKey.values) + alone).map { members in
            members.sorted { a, b in
                let (x, y) = (creation(of: a)!.op.timestamp, creation(of: b)!.op.timestamp)
                return x != y ? x < y : a < b
            }
        }
    }

    struct Expected {
        var snapshot: ConversationSnapshot
        var messages: [MessageSnapshot]
    }

    /// What the replica must show for each merge group.
    mutating func expected() -> [Expected] {
        groups().map { expected(group: $0) }.sorted { $0.snapshot.id < $1.snapshot.id }
    }

    mutating func expected(group members: [ConversationID]) -> Expected {
        let canonical = creation(of: members[0])!
        let groupOps = members.flatMap { ops(in: $0) }

        var named: Set<UserID> = []
        for signed in groupOps {
            switch signed.operation.body {
            case .createConversation(let users, _, _, _), .addParticipants(let users), .removeParticipants(let users):
                named.formUnion(users)
            default: break
            }
        }
        var participants: [UserID] = []
        for user in named where members.allSatisfy({ admits(user, in: $0) != false }) { participants.append(user) }
        participants.sort()

        let changedMembership = groupOps.contains {
            switch $0.operation.body {
            case .addParticipants, .removeParticipants: true
            default: false
            }
        }
        let isDistinct = members.allSatisfy { creation(of: $0)!.distinct } && !changedMembership

        // Last writer wins by (timestamp, author, operation).
        var writes: [String: (HLCTimestamp, UserID, OperationID, String?)] = [:]
        func write(_ key: String, _ candidate: (HLCTimestamp, UserID, OperationID, String?)) {
            guard let current = writes[key] else { writes[key] = candidate; return }
            let later = candidate.0 != current.0 ? candidate.0 > current.0
                : candidate.1 != current.1 ? current.1 < candidate.1 : current.2 < candidate.2
            if later { writes[key] = candidate }
        }
        for signed in groupOps {
            let op = signed.operation
            switch op.body {
            case .createConversation(_, _, _, let metadata):
                for (key, value) in metadata { write(key, (op.timestamp, op.author, signed.id, value)) }
            case .setMetadata(let entries):
                for (key, value) in entries { write(key, (op.timestamp, op.author, signed.id, value)) }
            default: break
            }
        }

        let deleted = Set(groupOps.compactMap { signed -> OperationID? in
            if case .deleteMessage(let id) = signed.operation.body { id } else { nil }
        })
        let posts = groupOps.filter {
            if case .postMessage = $0.operation.body { !deleted.contains($0.id) } else { false }
        }.sorted { a, b in
            let (x, y) = (a.operation, b.operation)
            if x.timestamp != y.timestamp { return x.timestamp < y.timestamp }
            if x.author != y.author { return x.author < y.author }
            return a.id < b.id
        }

        var messages: [MessageSnapshot] = []
        var unread = 0
        for (position, post) in posts.enumerated() {
            guard case .postMessage(let parts, let options) = post.operation.body else { continue }
            var status: [UserID: RecipientStatus] = [:]
            for user in participants where user != post.operation.author {
                status[user] = self.status(of: post.id, for: user)
            }
            // Unread counts only while the local user takes part (they cannot mark read after).
            if participants.contains(localUser), post.operation.author != localUser,
                self.status(of: post.id, for: localUser) != .read
            {
                unread += 1
            }
            messages.append(MessageSnapshot(
                id: post.id, conversation: members[0], postedTo: post.operation.conversation, sender: post.operation.author,
                sentAt: post.operation.timestamp, parts: parts, options: options, position: position, recipientStatus: status))
        }

        let snapshot = ConversationSnapshot(
            id: members[0], mergedIDs: members.dropFirst().sorted(), creator: canonical.op.author,
            createdAt: canonical.op.timestamp, participants: participants, isDistinct: isDistinct,
            metadata: writes.compactMapValues(\.3), messageCount: posts.count, unreadCount: unread,
            lastMessageAt: posts.last?.operation.timestamp)
        return Expected(snapshot: snapshot, messages: messages)
    }

    /// The unread count `user` would see for a group: messages of others not read by `user`,
    /// none once `user` no longer takes part.
    mutating func unreadCount(of expected: Expected, for user: UserID) -> Int {
        guard expected.snapshot.participants.contains(user) else { return 0 }
        return expected.messages.filter { $0.sender != user && status(of: $0.id, for: user) != .read }.count
    }

    /// §13.6: read (an explicit receipt, or a mark-all-read with the message in its past) >
    /// delivered > sent.
    mutating func status(of message: OperationID, for user: UserID) -> RecipientStatus {
        if reads[user]?.contains(message) == true { return .read }
        for mark in marks[user] ?? [] where ancestors(of: mark).contains(message) { return .read }
        return deliveries[user]?.contains(message) == true ? .delivered : .sent
    }
}
