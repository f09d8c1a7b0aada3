import Foundation
import GRDB
import WeftModel

/// Conversation queries: reading the materialized conversations (`conversation`, `participant`,
/// `metadata` tables), from SQLite and never from the replica, so a process that only queries
/// never loads it. Owns resolving an identifier to its canonical conversation, snapshots,
/// queries and counts, and the local user's memberships a send checks (`Memberships`, which
/// every commit clears of what it moved).
///
/// Each read comes twice, as in `Store+Replication.swift`: `fetch…`, async, and the synchronous
/// one, which blocks the calling thread.
struct ConversationQueries: Sendable {
    let database: any DatabaseWriter
    let localUser: UserID
    let memberships: Memberships

    /// The conversation `id` resolves to: itself, or the canonical conversation it was merged into.
    func fetchConversation(_ id: ConversationID) async throws -> ConversationSnapshot? {
        try await database.read { db in try Self.conversation(id, in: db) }
    }

    /// `fetchConversation(_:)`, blocking the calling thread.
    func conversation(_ id: ConversationID) throws -> ConversationSnapshot? {
        try database.read { db in try Self.conversation(id, in: db) }
    }

    private static func conversation(_ id: ConversationID, in db: Database) throws -> ConversationSnapshot? {
        guard let canonical = try canonical(of: id, in: db) else { return nil }
        return try conversations(ids: [canonical], in: db).first
    }

    /// Canonical conversations matching `query`.
    func fetchConversations(_ query: ConversationQuery) async throws -> [ConversationSnapshot] {
        try await database.read { db in try Self.conversations(query, in: db) }
    }

    /// `fetchConversations(_:)`, blocking the calling thread.
    func conversations(_ query: ConversationQuery) throws -> [ConversationSnapshot] {
        try database.read { db in try Self.conversations(query, in: db) }
    }

    private static func conversations(_ query: ConversationQuery, in db: Database) throws -> [ConversationSnapshot] {
        let sql = try QueryTranslation.select(query, in: db)
        let ids = try Data.fetchAll(db, sql: sql.text, arguments: sql.arguments).map { try Stored.conversationID($0, "conversation.id") }
        return try conversations(ids: ids, in: db)
    }

    /// How many conversations `query` returns (its offset and limit applied).
    func fetchCount(_ query: ConversationQuery) async throws -> Int {
        try await database.read { db in try Self.count(query, in: db) }
    }

    /// `fetchCount(_:)`, blocking the calling thread.
    func count(_ query: ConversationQuery) throws -> Int {
        try database.read { db in try Self.count(query, in: db) }
    }

    private static func count(_ query: ConversationQuery, in db: Database) throws -> Int {
        let sql = try QueryTranslation.count(query, in: db)
        let total = try Int.fetchOne(db, sql: sql.text, arguments: sql.arguments) ?? 0
        return QueryTranslation.window(total, query.offset, query.limit)
    }

    /// `Store.fetchMembership(of:in:)`: the canonical conversation `id` resolves to, and
    /// whether `user` is one of its participants; for the local user, kept in `Memberships`.
    func fetchMembership(of user: UserID, in id: ConversationID) async throws -> (canonical: ConversationID, isParticipant: Bool)? {
        // A single statement reads one state of the database on its own, so it runs outside a
        // transaction: GRDB's BEGIN and COMMIT around it cost more than the query.
        guard user == localUser else { return try await database.unsafeRead { db in try Self.membership(of: user, in: id, in: db) } }
        let (known, generation) = memberships.lookUp(id)
        if let known { return known }
        let found = try await database.unsafeRead { db in try Self.membership(of: user, in: id, in: db) }
        if let found { memberships.keep(found, for: id, readAt: generation) }
        return found
    }

    /// `fetchMembership(of:in:)`, blocking the calling thread.
    func membership(of user: UserID, in id: ConversationID) throws -> (canonical: ConversationID, isParticipant: Bool)? {
        guard user == localUser else { return try database.unsafeRead { db in try Self.membership(of: user, in: id, in: db) } }
        let (known, generation) = memberships.lookUp(id)
        if let known { return known }
        let found = try database.unsafeRead { db in try Self.membership(of: user, in: id, in: db) }
        if let found { memberships.keep(found, for: id, readAt: generation) }
        return found
    }

    private static func membership(of user: UserID, in id: ConversationID, in db: Database) throws -> (canonical: ConversationID, isParticipant: Bool)? {
        let row = try Row.fetchOne(
            db.cached("""
                SELECT c.canonical, EXISTS (SELECT 1 FROM participant p WHERE p.conversation = c.canonical AND p.user = ?)
                FROM conversation c WHERE c.id = ?
                """),
            arguments: [Data(user.bytes), Data(id.bytes)])
        guard let row else { return nil }
        return (try row.conversationID(0, "conversation.canonical"), try row.flag(1, "EXISTS (participant)"))
    }

    /// The canonical identifier `id` resolves to, nil if the store has no such conversation.
    static func canonical(of id: ConversationID, in db: Database) throws -> ConversationID? {
        try Data.fetchOne(db.cached("SELECT canonical FROM conversation WHERE id = ?"), arguments: [Data(id.bytes)])
            .map { try Stored.conversationID($0, "conversation.canonical") }
    }

    /// Snapshots of canonical conversations, in the order given.
    static func conversations(ids: [ConversationID], in db: Database) throws -> [ConversationSnapshot] {
        guard !ids.isEmpty else { return [] }
        var participants: [ConversationID: [UserID]] = [:]
        var metadata: [ConversationID: [String: String]] = [:]
        var merged: [ConversationID: [ConversationID]] = [:]
        var rows: [ConversationID: Row] = [:]
        for chunk in ids.chunked(500) {
            let list = chunk.map { Data($0.bytes) }
            let marks = Array(repeating: "?", count: list.count).joined(separator: ",")
            for row in try Row.fetchAll(db.cached("""
                SELECT id, creator, createdAt, isDistinct, messageCount, unreadCount, lastMessageAt
                FROM conversation WHERE id IN (\(marks)) AND canonical = id
                """), arguments: StatementArguments(list))
            {
                rows[try row.conversationID(0, "conversation.id")] = row
            }
            for row in try Row.fetchAll(
                db.cached("SELECT conversation, user FROM participant WHERE conversation IN (\(marks)) ORDER BY conversation, user"),
                arguments: StatementArguments(list))
            {
                participants[try row.conversationID(0, "participant.conversation"), default: []]
                    .append(try row.userID(1, "participant.user"))
            }
            for row in try Row.fetchAll(
                db.cached("SELECT conversation, key, value FROM metadata WHERE conversation IN (\(marks))"),
                arguments: StatementArguments(list))
            {
                metadata[try row.conversationID(0, "metadata.conversation"), default: [:]][try row.text(1, "metadata.key")] =
                    try row.text(2, "metadata.value")
            }
            for row in try Row.fetchAll(
                db.cached("SELECT canonical, id FROM conversation WHERE canonical IN (\(marks)) AND canonical != id ORDER BY id"),
                arguments: StatementArguments(list))
            {
                merged[try row.conversationID(0, "conversation.canonical"), default: []].append(try row.conversationID(1, "conversation.id"))
            }
        }
        return try ids.compactMap { id in
            guard let row = rows[id] else { return nil }
            return ConversationSnapshot(
                id, mergedIDs: merged[id] ?? [], creator: try row.userID(1, "conversation.creator"),
                createdAt: HLCTimestamp(databaseValue: try row.integer(2, "conversation.createdAt")), participants: participants[id] ?? [],
                isDistinct: try row.flag(3, "conversation.isDistinct"), metadata: metadata[id] ?? [:],
                messageCount: try row.count(4, "conversation.messageCount"), unreadCount: try row.count(5, "conversation.unreadCount"),
                lastMessageAt: try row.optionalInteger(6, "conversation.lastMessageAt").map(HLCTimestamp.init(databaseValue:)))
        }
    }
}
