import WeftCrypto
import WeftModel
import WeftSync

/// Identities from fixed seeds and helpers that write real signed operations.
enum SyncFixtures {
    static let identities: [NodeIdentity] = (0..<40).map { index in
        NodeIdentity(seed: SecureBytes(copying: [UInt8](repeating: UInt8(index + 1), count: NodeIdentity.seedByteCount)))
    }
    static let users: [UserID] = identities.map(\.publicKey)

    static func text(_ text: String) -> OperationBody {
        .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array(text.utf8))], options: MessageOptions())
    }

    /// A conversation of users 0 and 1 created by user 0, then `messages` messages by user 0:
    /// a chain of `messages + 1` operations of one author, in causal order.
    static func conversation(messages: Int, author index: Int = 0, startingAt wall: UInt64 = 1_000) throws -> [SignedOperation] {
        var author = Author(identity: identities[index])
        var replica = Replica(localUser: users[index])
        let creation = author.createConversation(with: [users[(index + 1) % users.count]], in: replica, wallMilliseconds: wall)
        var ops = [creation]
        _ = replica.apply(verified: [creation])
        for number in 0..<messages {
            let op = author.write(text("message \(number)"), in: creation.operation.conversation, replica: replica, wallMilliseconds: wall + UInt64(number) + 1)
            _ = replica.apply(verified: [op])
            ops.append(op)
        }
        return ops
    }

    /// The summary of a log holding `ops` (all of one conversation).
    static func summary(of ops: [SignedOperation], isPublished: Bool = true) -> LogSummary {
        var held: [UserID: Set<UInt64>] = [:]
        for op in ops { held[op.operation.author, default: []].insert(op.operation.sequence) }
        var heads = VersionVector()
        for (author, sequences) in held {
            var head: UInt64 = 0
            while sequences.contains(head + 1) { head += 1 }
            heads.set(author, head)
        }
        return LogSummary(
            conversation: ops[0].operation.conversation, heads: heads, digest: SetDigest(ops.map(\.id)), operationCount: ops.count,
            lastActivity: ops.map(\.operation.timestamp).max()!, isPublished: isPublished)
    }
}
