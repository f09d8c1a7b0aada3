import Dispatch
import Foundation
import GRDB
import Synchronization
import WeftCrypto
import WeftModel

// A fast bulk path for benchmarks: a store of many conversations built without the replica.
@_spi(Benchmarks)
extension Store {
    /// Fills an empty store with `conversations` conversations of `messagesPerConversation`
    /// messages each, writing the rows directly instead of applying the operations to the
    /// replica (which would hold them all in memory). The operations are real and signed, and
    /// the rows are exactly those the replica would materialize (a test checks this by
    /// rebuilding the replica from the log): conversation `k` is created (non-distinct, titled)
    /// by `peers[k % peers.count]` with the local user; its messages alternate between the peer
    /// and the local user, one chain, without receipts (so every peer message is unread).
    ///
    /// Signing runs in parallel over the cores; each group of conversations is one transaction.
    /// Publishes nothing to `changes()` subscribers: it builds a store, it does not use one.
    public func fillSynthetic(
        conversations: Int, messagesPerConversation: Int, local: NodeIdentity, peers: [NodeIdentity],
        progress: ((_ conversationsDone: Int) -> Void)? = nil
    ) async throws {
        precondition(local.publicKey == localUser, "the synthetic conversations are the local user's")
        precondition(!peers.isEmpty, "a conversation needs a peer")
        let startMilliseconds: UInt64 = 1_700_000_000_000
        let localUser = self.localUser
        let groupSize = 16
        for groupStart in stride(from: 0, to: conversations, by: groupSize) {
            let group = Array(groupStart..<min(conversations, groupStart + groupSize))
            let built = SyntheticGroup(count: group.count)
            DispatchQueue.concurrentPerform(iterations: group.count) { index in
                built.set(index, Self.syntheticConversation(
                    number: group[index], messages: messagesPerConversation, local: local,
                    peer: peers[group[index] % peers.count], startMilliseconds: startMilliseconds))
            }
            try await database.write { db in
                var order = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(appliedOrder), 0) FROM operation") ?? 0
                let rows = Materializer(db: db, replica: Replica(localUser: localUser), localUser: localUser)
                for conversation in built.values {
                    for signed in conversation.operations {
                        order += 1
                        try rows.insertOperation(signed, order: order, status: "accepted", reason: nil)
                    }
                    // A peer created it: published, like every log received.
                    let summaries = LogSummaryTable(db: db)
                    try summaries.add(conversation.operations.map(LogSummaryTable.Stored.init), publishing: [conversation.snapshot.id])
                    try rows.writeConversation(conversation.snapshot, properties: nil)
                    for message in conversation.messages {
                        try rows.insertMessage(message, isUnread: message.sender != localUser)
                    }
                }
            }
            progress?(group.last! + 1)
        }
        operationLog.forgetReplica()
    }

    private static func syntheticConversation(
        number: Int, messages count: Int, local: NodeIdentity, peer: NodeIdentity, startMilliseconds: UInt64
    ) -> SyntheticConversation {
        var creator = Author(identity: peer)
        let creation = creator.createConversation(
            with: [local.publicKey], distinct: false, metadata: ["title": "Conversation \(number)"],
            in: Replica(localUser: nil), wallMilliseconds: startMilliseconds + UInt64(number))
        let id = creation.operation.conversation
        var operations = [creation]
        operations.reserveCapacity(count + 1)
        var messages: [MessageSnapshot] = []
        messages.reserveCapacity(count)
        var sequences = [peer.publicKey: UInt64(1), local.publicKey: 0]
        for index in 0..<count {
            let sender = index % 2 == 0 ? peer : local
            let recipient = index % 2 == 0 ? local.publicKey : peer.publicKey
            sequences[sender.publicKey, default: 0] += 1
            let text = "message \(index) of conversation \(number)"
            let part = MessagePart(mimeType: "text/plain", data: Array(text.utf8))
            let timestamp = HLCTimestamp(milliseconds: startMilliseconds + 1_000 * UInt64(index + 1) + UInt64(number), counter: 0)
            let signed = SignedOperation(
                signing: Operation(
                    author: sender.publicKey, conversation: id, sequence: sequences[sender.publicKey, default: 0], timestamp: timestamp,
                    causes: [operations.last!.id], body: .postMessage(parts: [part], options: MessageOptions())),
                with: sender)
            operations.append(signed)
            messages.append(MessageSnapshot(
                signed.id, conversation: id, postedTo: id, sender: sender.publicKey, sentAt: timestamp, parts: [part],
                options: MessageOptions(), position: index, recipientStatus: [recipient: .sent]))
        }
        let snapshot = ConversationSnapshot(
            id, mergedIDs: [], creator: peer.publicKey, createdAt: creation.operation.timestamp,
            participants: [local.publicKey, peer.publicKey].sorted(), isDistinct: false,
            metadata: ["title": "Conversation \(number)"], messageCount: count, unreadCount: (count + 1) / 2,
            lastMessageAt: messages.last?.sentAt)
        return SyntheticConversation(operations: operations, snapshot: snapshot, messages: messages)
    }
}

struct SyntheticConversation: Sendable {
    var operations: [SignedOperation]
    var snapshot: ConversationSnapshot
    var messages: [MessageSnapshot]
}

/// Conversations built in parallel, one slot each.
final class SyntheticGroup: Sendable {
    private let slots: Mutex<[SyntheticConversation?]>
    init(count: Int) { slots = Mutex(Array(repeating: nil, count: count)) }
    func set(_ index: Int, _ value: SyntheticConversation) { slots.withLock { $0[index] = value } }
    var values: [SyntheticConversation] { slots.withLock { $0.map { $0! } } }
}
