import WeftCrypto
import WeftModel

/// The seeded generator (WeftCrypto.SplitMix64), so every random schedule replays from its seed.
typealias SeededGenerator = SplitMix64

/// Several users working apart and gossiping now and then, each on their own replica: distinct
/// conversations created concurrently (so they merge), membership changes, metadata, messages
/// with several parts, receipts, watermarks and deletions. Every operation any of them writes
/// ends up in `operations`, in the order written.
struct Workload {
    var authors: [Author]
    var replicas: [Replica]
    /// Each user's operations in the order its replica applied them (causal order).
    var held: [[SignedOperation]]
    var known: [Set<OperationID>]
    var operations: [SignedOperation] = []
    var rng: SeededGenerator
    var now: UInt64 = 1_700_000_000_000

    static let mimeTypes = ["text/plain", "image/png", "application/json; charset=utf-8"]

    init(users: Int = 4, seed: UInt64) {
        rng = SeededGenerator(seed: seed)
        // Fixed seeds: the same users for the same workload seed.
        authors = (0..<users).map { index in
            var seedBytes = [UInt8](repeating: UInt8(index + 1), count: NodeIdentity.seedByteCount)
            seedBytes[0] = UInt8(truncatingIfNeeded: seed)
            return Author(identity: NodeIdentity(seed: SecureBytes(copying: seedBytes)))
        }
        replicas = authors.map { Replica(localUser: $0.user) }
        held = Array(repeating: [], count: users)
        known = Array(repeating: [], count: users)
    }

    var users: [UserID] { authors.map(\.user) }

    /// Runs `steps` random actions, gossiping between random pairs every few.
    mutating func run(steps: Int) {
        for step in 0..<steps {
            act()
            if step % 7 == 6 {
                let a = Int.random(in: 0..<authors.count, using: &rng)
                let b = Int.random(in: 0..<authors.count, using: &rng)
                gossip(a, b)
            }
        }
    }

    /// Both users end up with everything either had.
    mutating func gossip(_ a: Int, _ b: Int) {
        guard a != b else { return }
        let toB = held[a].filter { !known[b].contains($0.id) }
        let toA = held[b].filter { !known[a].contains($0.id) }
        receive(toB, by: b)
        receive(toA, by: a)
    }

    mutating func gossipAll() {
        for a in authors.indices { for b in authors.indices { gossip(a, b) } }
    }

    private mutating func receive(_ ops: [SignedOperation], by user: Int) {
        let report = replicas[user].apply(verified: ops)
        let byID = Dictionary(ops.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for id in report.accepted {
            if let op = byID[id] ?? operations.first(where: { $0.id == id }), known[user].insert(id).inserted {
                held[user].append(op)
            }
        }
        for op in ops { known[user].insert(op.id) }
    }

    /// One operation written by `user` and applied to its replica.
    private mutating func record(_ op: SignedOperation, by user: Int) {
        operations.append(op)
        receive([op], by: user)
    }

    private mutating func act() {
        now += UInt64.random(in: 0...3, using: &rng)  // equal milliseconds happen: ties in order
        let u = Int.random(in: 0..<authors.count, using: &rng)
        let me = authors[u].user
        let replica = replicas[u]
        let mine = replica.conversationIDs.filter { replica.isParticipant(me, of: $0) }
        let others = users.filter { $0 != me }
        let roll = Int.random(in: 0..<100, using: &rng)

        if mine.isEmpty || roll < 10 {
            let count = Int.random(in: 1...min(2, others.count), using: &rng)
            let with = Set(others.shuffled(using: &rng).prefix(count))
            let distinct = Int.random(in: 0..<5, using: &rng) > 0
            let metadata = Bool.random(using: &rng) ? ["title": "t\(Int.random(in: 0..<100, using: &rng))"] : [:]
            let op = authors[u].createConversation(
                with: with, distinct: distinct, metadata: metadata, in: replica, wallMilliseconds: now)
            record(op, by: u)
            return
        }
        let conversation = mine.randomElement(using: &rng)!
        let snapshot = replica.conversation(conversation)!
        // Messages of the log written to (receipts and deletions must name messages of it).
        let messages = replica.messages(in: conversation).filter { $0.postedTo == conversation }
        let body: OperationBody
        switch roll {
        case 10..<55:
            let parts = (0..<Int.random(in: 1...2, using: &rng)).map { index in
                MessagePart(
                    mimeType: Self.mimeTypes.randomElement(using: &rng)!,
                    data: Array("m\(operations.count).\(index)".utf8))
            }
            let options = Bool.random(using: &rng) ? MessageOptions(notificationText: "n\(operations.count)", notificationSound: nil) : MessageOptions()
            body = .postMessage(parts: parts, options: options)
        case 55..<58:
            guard let user = users.filter({ !snapshot.participants.contains($0) }).randomElement(using: &rng) else { return }
            body = .addParticipants([user])
        case 58..<61:
            guard let user = snapshot.participants.randomElement(using: &rng) else { return }
            body = .removeParticipants([user])
        case 61..<67:
            let key = ["title", "topic"].randomElement(using: &rng)!
            body = .setMetadata([key: Bool.random(using: &rng) ? "v\(operations.count)" : nil])
        case 67..<78:
            let candidates = messages.filter { $0.sender != me }
            guard !candidates.isEmpty else { return }
            body = .delivered(Array(candidates.shuffled(using: &rng).prefix(3).map(\.id)))
        case 78..<88:
            let candidates = messages.filter { $0.sender != me }
            guard !candidates.isEmpty else { return }
            body = .read(Array(candidates.shuffled(using: &rng).prefix(2).map(\.id)))
        case 88..<93:
            body = .markAllRead
        default:
            guard let message = messages.filter({ $0.sender == me }).randomElement(using: &rng) else { return }
            body = .deleteMessage(message.id)
        }
        let op = authors[u].write(body, in: conversation, replica: replica, wallMilliseconds: now)
        record(op, by: u)
    }
}

extension SignedOperation {
    /// The same operation with one signature bit flipped.
    var withBadSignature: SignedOperation {
        var wire = wireBytes
        wire[wire.count - 1] ^= 0x01
        return try! SignedOperation(wireBytes: wire)
    }
}
