import WeftControl
import WeftCrypto
import WeftModel

extension LocalMesh {
    /// What one node shows of the mesh's state, reduced to what every node holding the same
    /// operations shows alike: operations held, and per conversation its participants,
    /// merges, metadata and messages with each recipient's status. (Unread flags and counts
    /// are the local user's own, and `isSent` is the sender's, so they are left out.)
    public struct Snapshot: Hashable, Sendable {
        public var heldOperations: UInt64?
        public var unsyncedOperations: UInt64?
        /// The conversations the node shows, by identifier.
        public var conversations: [ConversationID: ConversationState]

        public struct ConversationState: Hashable, Sendable {
            public var participants: [UserID]
            public var merged: [ConversationID]
            public var isDistinct: Bool
            public var metadata: [String: String]
            public var messages: [MessageState]
        }

        public struct MessageState: Hashable, Sendable {
            public var id: OperationID
            public var sender: UserID
            public var position: UInt32
            public var recipients: [MessageRecord.Recipient]
        }
    }

    /// Node `index`'s snapshot, through STATUS, CONVERSATIONS and MESSAGES.
    public func snapshot(of index: Int) async throws -> Snapshot {
        let node = nodes[index]
        let status = try await node.status()
        var conversations: [ConversationID: Snapshot.ConversationState] = [:]
        for record in try await node.conversations() {
            let messages = try await node.messages(in: record.id).map {
                Snapshot.MessageState(id: $0.id, sender: $0.sender, position: $0.position, recipients: $0.recipients)
            }
            conversations[record.id] = Snapshot.ConversationState(
                participants: record.participants, merged: record.merged, isDistinct: record.isDistinct, metadata: record.metadata,
                messages: messages)
        }
        return Snapshot(heldOperations: status.heldOperations, unsyncedOperations: status.unsyncedOperations, conversations: conversations)
    }

    /// Polls until the nodes `among` (every running node by default) hold the same number of
    /// operations, none knows of operations it lacks, and every conversation shown by several
    /// of them is shown alike (same participants, merges, metadata, messages and statuses).
    /// Throws after `timeout`, saying what still differs.
    public func waitUntilConverged(among indices: [Int]? = nil, timeout: Duration = .seconds(30)) async throws {
        var difference = "no node answered"
        try await poll(timeout: timeout, what: { "the nodes had not converged: \(difference)" }) {
            let members = indices ?? nodes.filter(\.isRunning).map(\.index)
            var snapshots: [(Node, Snapshot)] = []
            for index in members { snapshots.append((nodes[index], try await snapshot(of: index))) }
            guard let (first, reference) = snapshots.first else { return true }
            for (node, snapshot) in snapshots {
                if snapshot.unsyncedOperations != 0 {
                    difference = "\(node.name) knows of \(snapshot.unsyncedOperations.map(String.init) ?? "unknown") operations it lacks"
                    return false
                }
                if snapshot.heldOperations != reference.heldOperations {
                    difference = "\(first.name) holds \(reference.heldOperations.map(String.init) ?? "?") operations, "
                        + "\(node.name) \(snapshot.heldOperations.map(String.init) ?? "?")"
                    return false
                }
            }
            var seen: [ConversationID: (Node, Snapshot.ConversationState)] = [:]
            for (node, snapshot) in snapshots {
                for (id, state) in snapshot.conversations {
                    if let (other, shown) = seen[id], shown != state {
                        difference = "conversation \(id.hex) differs between \(other.name) and \(node.name)"
                        return false
                    }
                    seen[id] = (node, state)
                }
            }
            return true
        }
    }

    /// Polls `condition` (given the mesh) until it holds, or throws `what` after `timeout`:
    /// the way to wait for anything else (a status, a count) without sleeping a fixed time.
    public func waitUntil(_ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool) async throws {
        try await poll(timeout: timeout, what: { "\(what) did not happen" }, condition)
    }
}
