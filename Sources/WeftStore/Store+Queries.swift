import WeftModel

// Reads come from SQLite, never from the replica: a process that only queries never loads it
// (`ConversationQueries`, `MessageQueries`).
//
// Each read comes twice, as in `Store+Replication.swift`: `fetch…`, async, for async code (the
// task waits suspended while GRDB reads on its own threads), and the synchronous one, which
// blocks the calling thread (tools, tests).
extension Store {
    // MARK: - Conversations

    /// The conversation `id` resolves to: itself, or the canonical conversation it was merged into.
    public func fetchConversation(_ id: ConversationID) async throws -> ConversationSnapshot? {
        try await conversationQueries.fetchConversation(id)
    }

    /// `fetchConversation(_:)`, blocking the calling thread.
    public func conversation(_ id: ConversationID) throws -> ConversationSnapshot? { try conversationQueries.conversation(id) }

    /// Canonical conversations matching `query`.
    public func fetchConversations(_ query: ConversationQuery) async throws -> [ConversationSnapshot] {
        try await conversationQueries.fetchConversations(query)
    }

    /// `fetchConversations(_:)`, blocking the calling thread.
    public func conversations(_ query: ConversationQuery) throws -> [ConversationSnapshot] { try conversationQueries.conversations(query) }

    /// How many conversations `query` returns (its offset and limit applied).
    public func fetchCount(_ query: ConversationQuery) async throws -> Int { try await conversationQueries.fetchCount(query) }

    /// `fetchCount(_:)`, blocking the calling thread.
    public func count(_ query: ConversationQuery) throws -> Int { try conversationQueries.count(query) }

    /// The canonical conversation `id` resolves to, and whether `user` is one of its
    /// participants; nil if the store has no such conversation: what a send checks before it
    /// posts. For the local user, the answer is kept until a commit changes who is in a
    /// conversation or merges one (`Memberships`); the post's commit checks again anyway.
    public func fetchMembership(of user: UserID, in id: ConversationID) async throws -> (canonical: ConversationID, isParticipant: Bool)? {
        try await conversationQueries.fetchMembership(of: user, in: id)
    }

    /// `fetchMembership(of:in:)`, blocking the calling thread.
    public func membership(of user: UserID, in id: ConversationID) throws -> (canonical: ConversationID, isParticipant: Bool)? {
        try conversationQueries.membership(of: user, in: id)
    }

    // MARK: - Messages

    /// One message, by identifier, in its canonical conversation.
    public func fetchMessage(_ id: OperationID) async throws -> MessageSnapshot? { try await messageQueries.fetchMessage(id) }

    /// The bytes of part `index` of `message`, from the operation log: a queried message
    /// carries the bytes of parts of at most 2048 bytes only (`MessagePart.unloadedByteCount`
    /// says the size of a larger one). A rich-content part has none here: empty. Nil if the
    /// store holds no such message or part.
    public func fetchPartData(of message: OperationID, index: Int) async throws -> [UInt8]? {
        try await messageQueries.fetchPartData(of: message, index: index)
    }

    /// `fetchMessage(_:)`, blocking the calling thread.
    public func message(_ id: OperationID) throws -> MessageSnapshot? { try messageQueries.message(id) }

    /// Messages matching `query`. Positions are computed, not stored: they equal the
    /// replica's (the index of each message in its conversation's order, SPEC.md §13.5).
    public func fetchMessages(_ query: MessageQuery) async throws -> [MessageSnapshot] { try await messageQueries.fetchMessages(query) }

    /// `fetchMessages(_:)`, blocking the calling thread.
    public func messages(_ query: MessageQuery) throws -> [MessageSnapshot] { try messageQueries.messages(query) }

    /// How many messages `query` returns (its offset and limit applied).
    public func fetchCount(_ query: MessageQuery) async throws -> Int { try await messageQueries.fetchCount(query) }

    /// `fetchCount(_:)`, blocking the calling thread.
    public func count(_ query: MessageQuery) throws -> Int { try messageQueries.count(query) }
}
