import WeftCrypto
@testable import WeftModel

/// One random schedule: a few nodes, each writing operations from its own view of the state,
/// exchanging operations in random subsets, orders and duplicates; at the end everyone receives
/// everything. Every choice comes from `rng`, so a seed replays the schedule exactly.
struct Simulation {
    struct Node {
        var author: Author
        var replica: Replica
        /// The node's wall clock: nodes drift apart and often read the same millisecond.
        var wall: UInt64
        /// A copy of this node's author and replica, as a backup restored on a second device
        /// would hold them: writing from it reuses sequence numbers (equivocation).
        var backup: (author: Author, replica: Replica)?
        /// Positions in `received` delivered to this node (its own operations included).
        var delivered: Set<Int> = []
    }

    enum Action: CaseIterable {
        case createDistinct, createNonDistinct, post, add, remove, metadata, delivered, read, markAllRead, delete
        case deliver, restoreBackup
    }

    static let weights: [(Action, Int)] = [
        (.createDistinct, 6), (.createNonDistinct, 2), (.post, 18), (.add, 5), (.remove, 5), (.metadata, 7),
        (.delivered, 7), (.read, 7), (.markAllRead, 4), (.delete, 3), (.deliver, 28), (.restoreBackup, 1),
    ]

    var rng: SeededGenerator
    var nodes: [Node]
    /// Every operation written, as its writer signed it.
    private(set) var written: [SignedOperation] = []
    /// The same operations as another node decodes them from their wire bytes.
    private(set) var received: [SignedOperation] = []
    /// Problems with the model seen while running (a writer's own operation refused, a wire
    /// round trip that changes an operation); empty when all is well.
    private(set) var problems: [String] = []
    let users: [UserID]
    let participantSets: [Set<UserID>]
    private(set) var equivocations = 0

    init(seed: UInt64, nodeCount: Int = 3) {
        rng = SeededGenerator(seed: seed)
        nodes = (0..<nodeCount).map { index in
            Node(
                author: Fixtures.author(index), replica: Replica(localUser: Fixtures.users[index]),
                wall: 1_000_000 + UInt64(index % 2))
        }
        // Two users beyond the nodes: they are added, removed and receive messages, but write nothing.
        users = Array(Fixtures.users.prefix(nodeCount + 2))
        participantSets = [
            Set(users.prefix(2)), Set(users.prefix(3)), Set([users[0], users[2]]), Set([users[1], users[3]]),
            Set([users[0], users[1], users[nodeCount]]),
        ]
    }

    // MARK: - Running

    /// Runs until `operationCount` operations were written, then delivers everything everywhere.
    mutating func run(operationCount: Int) {
        while written.count < operationCount { step() }
        deliverEverything()
    }

    mutating func step() {
        var pick = Int.random(in: 0..<Self.weights.reduce(0) { $0 + $1.1 }, using: &rng)
        var action = Action.post
        for (candidate, weight) in Self.weights {
            if pick < weight {
                action = candidate
                break
            }
            pick -= weight
        }
        let index = Int.random(in: 0..<nodes.count, using: &rng)
        for i in nodes.indices { nodes[i].wall += UInt64.random(in: 0...2, using: &rng) }
        switch action {
        case .deliver: deliverSome(to: index)
        case .restoreBackup: restoreBackup(of: index)
        default: write(action, at: index)
        }
    }

    /// A random subset of the operations `index` has not received yet, plus a few it has (as
    /// duplicates), shuffled; in one batch or one by one.
    mutating func deliverSome(to index: Int) {
        let share = [0.15, 0.4, 0.8].randomElement(using: &rng)!
        var batch: [SignedOperation] = []
        for (position, op) in received.enumerated() {
            if nodes[index].delivered.contains(position) {
                if rng.chance(0.05) { batch.append(op) }
            } else if rng.chance(share) {
                batch.append(op)
                nodes[index].delivered.insert(position)
            }
        }
        batch += batch.filter { _ in rng.chance(0.1) }
        batch.shuffle(using: &rng)
        if rng.chance(0.5) {
            _ = nodes[index].replica.apply(verified: batch)
        } else {
            nodes[index].replica.applyEach(batch)
        }
    }

    mutating func deliverEverything() {
        for index in nodes.indices {
            var all = received + received.filter { _ in rng.chance(0.3) }
            all.shuffle(using: &rng)
            let cut = Int.random(in: 0...all.count, using: &rng)
            _ = nodes[index].replica.apply(verified: Array(all[..<cut]))
            _ = nodes[index].replica.apply(verified: Array(all[cut...]))
        }
    }

    /// The operations shuffled with duplicates, for feeding fresh replicas.
    mutating func shuffledWithDuplicates() -> [SignedOperation] {
        var all = received + received.filter { _ in rng.chance(0.3) }
        all.shuffle(using: &rng)
        return all
    }

    // MARK: - Writing

    private mutating func record(_ op: SignedOperation, at index: Int, applyLocally: Bool = true) {
        written.append(op)
        if applyLocally { nodes[index].delivered.insert(written.count - 1) }
        do {
            let decoded = try SignedOperation(wireBytes: op.wireBytes)
            if decoded.id != op.id || decoded.encoding != op.encoding {
                problems.append("operation \(op.id) changes in a wire round trip")
            }
            received.append(decoded)
        } catch {
            problems.append("operation \(op.id) (\(op.operation.body)) cannot be decoded: \(error)")
            received.append(op)
        }
        guard applyLocally else { return }
        let report = nodes[index].replica.apply(verified: [op])
        for (id, error) in report.rejected where id == op.id {
            // A writer's own operation is refused only when it was removed, or it forked.
            if error.reason != .notAParticipant && error.reason != .equivocation {
                problems.append("node \(index)'s own operation \(op.operation.body) was refused: \(error)")
            }
        }
        if report.accepted.isEmpty && report.rejected.isEmpty {
            problems.append("node \(index)'s own operation \(op.operation.body) was neither accepted nor refused")
        }
    }

    private mutating func restoreBackup(of index: Int) {
        guard equivocations < 2 else { return }
        guard var (author, replica) = nodes[index].backup else {
            nodes[index].backup = (nodes[index].author, nodes[index].replica)
            return
        }
        nodes[index].backup = nil
        guard let conversation = replica.conversationIDs.randomElement(using: &rng) else { return }
        let op = author.write(
            Fixtures.text("from a restored backup"), in: conversation, replica: replica, wallMilliseconds: nodes[index].wall)
        _ = replica.apply(verified: [op])
        equivocations += 1
        record(op, at: index, applyLocally: false)
    }

    private mutating func write(_ action: Action, at index: Int) {
        let me = nodes[index].author.user
        let replica = nodes[index].replica
        let wall = nodes[index].wall
        let conversations = replica.conversationIDs
        if conversations.isEmpty || action == .createDistinct || action == .createNonDistinct {
            let set = rng.chance(0.8) ? participantSets.randomElement(using: &rng)! : Set(users.filter { _ in rng.chance(0.4) })
            var metadata: [String: String] = [:]
            if rng.chance(0.3) { metadata["title"] = "t\(Int.random(in: 0..<5, using: &rng))" }
            let op = nodes[index].author.createConversation(
                with: set.subtracting([me]), distinct: action != .createNonDistinct, metadata: metadata, in: replica,
                wallMilliseconds: wall)
            record(op, at: index)
            return
        }
        let conversation = conversations.randomElement(using: &rng)!
        // Usually the canonical conversation; sometimes a conversation merged into it.
        let logs = replica.members(ofGroupContaining: conversation)
        var target = rng.chance(0.8) ? logs[0] : logs.randomElement(using: &rng)!
        let body: OperationBody
        switch action {
        case .post:
            body = Fixtures.text("m\(written.count)")
        case .add:
            body = .addParticipants(Array(Set((0..<Int.random(in: 1...2, using: &rng)).map { _ in users.randomElement(using: &rng)! })))
        case .remove:
            let participants = replica.conversation(conversation)!.participants
            let candidates = rng.chance(0.8) && !participants.isEmpty ? participants : users
            body = .removeParticipants(Array(Set((0..<Int.random(in: 1...2, using: &rng)).map { _ in candidates.randomElement(using: &rng)! })))
        case .metadata:
            var entries: [String: String?] = [:]
            for _ in 0..<Int.random(in: 1...2, using: &rng) {
                let key = ["title", "topic", "colour"].randomElement(using: &rng)!
                entries[key] = rng.chance(0.2) ? .some(nil) : .some("v\(Int.random(in: 0..<4, using: &rng))")
            }
            body = .setMetadata(entries)
        case .delivered, .read:
            let others = replica.messages(in: conversation).filter { $0.sender != me }
            guard let first = others.randomElement(using: &rng) else { return }
            let ids = [first.id] + others.filter { $0.postedTo == first.postedTo && rng.chance(0.3) }.map(\.id)
            target = first.postedTo
            body = action == .read ? .read(Array(Set(ids)).sorted()) : .delivered(Array(Set(ids)).sorted())
        case .markAllRead:
            body = .markAllRead
        case .delete:
            guard let mine = replica.messages(in: conversation).filter({ $0.sender == me }).randomElement(using: &rng) else { return }
            target = mine.postedTo
            body = .deleteMessage(mine.id)
        case .createDistinct, .createNonDistinct, .deliver, .restoreBackup:
            preconditionFailure("handled elsewhere")
        }
        let op = nodes[index].author.write(body, in: target, replica: replica, wallMilliseconds: wall)
        record(op, at: index)
    }
}
