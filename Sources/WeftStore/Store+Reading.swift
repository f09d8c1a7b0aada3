import Foundation
import GRDB
import WeftCrypto
import WeftModel

// Reads come from SQLite, never from the replica: a process that only queries never loads it.
//
// Each read comes twice, as in `Store+Summaries.swift`: `fetch…`, async, for async code (the
// task waits suspended while GRDB reads on its own threads), and the synchronous one, which
// blocks the calling thread (tools, tests).
extension Store {
    // MARK: - Conversations

    /// The conversation `id` resolves to: itself, or the canonical conversation it was merged into.
    public func fetchConversation(_ id: ConversationID) async throws -> ConversationSnapshot? {
        try await database.read { db in try Self.conversation(id, in: db) }
    }

    /// `fetchConversation(_:)`, blocking the calling thread.
    public func conversation(_ id: ConversationID) throws -> ConversationSnapshot? {
        try database.read { db in try Self.conversation(id, in: db) }
    }

    private static func conversation(_ id: ConversationID, in db: Database) throws -> ConversationSnapshot? {
        guard let canonical = try canonical(of: id, in: db) else { return nil }
        return try conversations(ids: [canonical], in: db).first
    }

    /// Canonical conversations matching `query`.
    public func fetchConversations(_ query: ConversationQuery) async throws -> [ConversationSnapshot] {
        try await database.read { db in try Self.conversations(query, in: db) }
    }

    /// `fetchConversations(_:)`, blocking the calling thread.
    public func conversations(_ query: ConversationQuery) throws -> [ConversationSnapshot] {
        try database.read { db in try Self.conversations(query, in: db) }
    }

    private static func conversations(_ query: ConversationQuery, in db: Database) throws -> [ConversationSnapshot] {
        let sql = try QueryTranslation.select(query, in: db)
        let ids = try Data.fetchAll(db, sql: sql.text, arguments: sql.arguments).map { try Stored.conversationID($0, "conversation.id") }
        return try conversations(ids: ids, in: db)
    }

    /// How many conversations `query` returns (its offset and limit applied).
    public func fetchCount(_ query: ConversationQuery) async throws -> Int {
        try await database.read { db in try Self.count(query, in: db) }
    }

    /// `fetchCount(_:)`, blocking the calling thread.
    public func count(_ query: ConversationQuery) throws -> Int {
        try database.read { db in try Self.count(query, in: db) }
    }

    private static func count(_ query: ConversationQuery, in db: Database) throws -> Int {
        let sql = try QueryTranslation.count(query, in: db)
        let total = try Int.fetchOne(db, sql: sql.text, arguments: sql.arguments) ?? 0
        return QueryTranslation.window(total, query.offset, query.limit)
    }

    /// The canonical conversation `id` resolves to, and whether `user` is one of its
    /// participants; nil if the store has no such conversation: what a send checks before it
    /// posts. For the local user, the answer is kept until a commit changes who is in a
    /// conversation or merges one (`Memberships`); the post's commit checks again anyway.
    public func fetchMembership(of user: UserID, in id: ConversationID) async throws -> (canonical: ConversationID, isParticipant: Bool)? {
        // A single statement reads one state of the database on its own, so it runs outside a
        // transaction: GRDB's BEGIN and COMMIT around it cost more than the query.
        guard user == localUser else { return try await database.unsafeRead { db in try Self.membership(of: user, in: id, in: db) } }
        let (known, generation) = memberships.withLock { ($0.entries[id], $0.generation) }
        if let known { return known }
        let found = try await database.unsafeRead { db in try Self.membership(of: user, in: id, in: db) }
        if let found { memberships.withLock { $0.keep(found, for: id, readAt: generation) } }
        return found
    }

    /// `fetchMembership(of:in:)`, blocking the calling thread.
    public func membership(of user: UserID, in id: ConversationID) throws -> (canonical: ConversationID, isParticipant: Bool)? {
        guard user == localUser else { return try database.unsafeRead { db in try Self.membership(of: user, in: id, in: db) } }
        let (known, generation) = memberships.withLock { ($0.entries[id], $0.generation) }
        if let known { return known }
        let found = try database.unsafeRead { db in try Self.membership(of: user, in: id, in: db) }
        if let found { memberships.withLock { $0.keep(found, for: id, readAt: generation) } }
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

    // MARK: - Messages

    /// One message, by identifier, in its canonical conversation.
    public func fetchMessage(_ id: OperationID) async throws -> MessageSnapshot? {
        try await database.read { db in try Self.messageSnapshot(id, in: db) }
    }

    /// `fetchMessage(_:)`, blocking the calling thread.
    public func message(_ id: OperationID) throws -> MessageSnapshot? {
        try database.read { db in try Self.messageSnapshot(id, in: db) }
    }

    /// Messages matching `query`. Positions are computed, not stored: they equal the
    /// replica's (the index of each message in its conversation's order, SPEC.md §13.5).
    public func fetchMessages(_ query: MessageQuery) async throws -> [MessageSnapshot] {
        try await database.read { db in try Self.messages(query, in: db) }
    }

    /// `fetchMessages(_:)`, blocking the calling thread.
    public func messages(_ query: MessageQuery) throws -> [MessageSnapshot] {
        try database.read { db in try Self.messages(query, in: db) }
    }

    private static func messages(_ query: MessageQuery, in db: Database) throws -> [MessageSnapshot] {
        if let page = try pageFromTheEnd(query, in: db) { return page }
        let sql = try QueryTranslation.select(query, columns: messageColumns, in: db)
        let rows = try Row.fetchAll(db, sql: sql.text, arguments: sql.arguments)
        // Latest-first queries find their positions faster counting from the end.
        let fromEnd = query.sort.first.map { !$0.ascending && ($0.property == .sentAt || $0.property == .position) } ?? false
        return try messages(rows: rows, countingFromEnd: fromEnd, firstPosition: firstPosition(of: query), in: db)
    }

    /// A page of one conversation in position order that lies in the conversation's second
    /// half, read backwards from the end: SQLite steps over every row an OFFSET skips, so the
    /// last page of a long conversation cost a walk through all of it (a client polling its
    /// latest message paid that on every poll). Nil for any other query.
    private static func pageFromTheEnd(_ query: MessageQuery, in db: Database) throws -> [MessageSnapshot]? {
        guard let first = firstPosition(of: query), let limit = query.limit, case .conversation(let id) = query.predicates[0].value,
            let total = try Int.fetchOne(
                db.cached("SELECT messageCount FROM conversation WHERE id = (SELECT canonical FROM conversation WHERE id = ?)"),
                arguments: [Data(id.bytes)]),
            first > total / 2
        else { return nil }
        let count = min(limit, total - first)
        guard count > 0 else { return [] }
        var backwards = query
        backwards.sort = [MessageSort(.position, ascending: false)]
        backwards.offset = total - first - count
        backwards.limit = count
        let sql = try QueryTranslation.select(backwards, columns: messageColumns, in: db)
        let rows = try Row.fetchAll(db, sql: sql.text, arguments: sql.arguments)
        return try messages(rows: rows.reversed(), countingFromEnd: false, firstPosition: first, in: db)
    }

    /// The position of the first row `query` returns when the query says it: a page of one
    /// conversation in position order starts at its offset, and counting the messages before
    /// it (a scan of the conversation up to the page) is not needed. Nil otherwise.
    static func firstPosition(of query: MessageQuery) -> Int? {
        guard let first = query.sort.first, first.property == .position, first.ascending, query.predicates.count == 1,
            query.predicates[0].property == .conversation, query.predicates[0].operator == .equal
        else { return nil }
        return query.offset
    }

    /// How many messages `query` returns (its offset and limit applied).
    public func fetchCount(_ query: MessageQuery) async throws -> Int {
        try await database.read { db in try Self.count(query, in: db) }
    }

    /// `fetchCount(_:)`, blocking the calling thread.
    public func count(_ query: MessageQuery) throws -> Int {
        try database.read { db in try Self.count(query, in: db) }
    }

    private static func count(_ query: MessageQuery, in db: Database) throws -> Int {
        let sql = try QueryTranslation.count(query, in: db)
        let total = try Int.fetchOne(db, sql: sql.text, arguments: sql.arguments) ?? 0
        return QueryTranslation.window(total, query.offset, query.limit)
    }

    static let messageColumns = """
        SELECT m.id, m.conversation, m.postedTo, m.sender, m.sentAt, m.notificationText, m.notificationSound, m.number
        FROM message m
        """

    /// Snapshots for message rows (in `messageColumns` order), with their parts, statuses and
    /// positions, in the order of the rows.
    /// `firstPosition`: the first row's position, when the query says it (the rows are then
    /// consecutive, in position order).
    static func messages(rows: [Row], countingFromEnd: Bool, firstPosition: Int? = nil, in db: Database) throws -> [MessageSnapshot] {
        guard !rows.isEmpty else { return [] }
        struct Key {
            var conversation: Data
            var sentAt: Int64
            var sender: Data
            var id: Data
        }
        let keys = try rows.map {
            Key(
                conversation: try $0.blob(1, "message.conversation"), sentAt: try $0.integer(4, "message.sentAt"),
                sender: try $0.blob(3, "message.sender"), id: try $0.blob(0, "message.id"))
        }
        // Parts and statuses by message row number.
        var parts: [Int64: [MessagePart]] = [:]
        var statuses: [Int64: [UserID: RecipientStatus]] = [:]
        let numbers = try rows.map { try $0.integer(7, "message.number") }
        for chunk in numbers.chunked(500) {
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            for row in try Row.fetchAll(
                db.cached("SELECT message, mimeType, data FROM part WHERE message IN (\(marks)) ORDER BY message, \"index\""),
                arguments: StatementArguments(chunk))
            {
                parts[try row.integer(0, "part.message"), default: []].append(
                    MessagePart(mimeType: try row.text(1, "part.mimeType"), data: [UInt8](try row.blob(2, "part.data"))))
            }
            for row in try Row.fetchAll(
                db.cached("SELECT message, recipient, status FROM receipt WHERE message IN (\(marks))"),
                arguments: StatementArguments(chunk))
            {
                // A status number the store does not know reads as invalid, as the model's does.
                statuses[try row.integer(0, "receipt.message"), default: [:]][try row.userID(1, "receipt.recipient")] =
                    RecipientStatus(rawValue: Int(try row.integer(2, "receipt.status"))) ?? .invalid
            }
        }

        // Positions: per conversation, the keys in order, each counted from the previous one
        // over the order index, so the cost is the span the results cover from one end.
        var positions: [Data: Int] = [:]
        if let firstPosition {
            for (index, key) in keys.enumerated() { positions[key.id] = firstPosition + index }
        }
        for (conversation, group) in Dictionary(grouping: keys, by: \.conversation) where firstPosition == nil {
            let sorted = group.sorted { a, b in
                if a.sentAt != b.sentAt { return a.sentAt < b.sentAt }
                if a.sender != b.sender { return a.sender.lexicographicallyPrecedes(b.sender) }
                return a.id.lexicographicallyPrecedes(b.id)
            }
            let between = try db.cachedStatement(sql: """
                SELECT COUNT(*) FROM message WHERE conversation = ?
                    AND (sentAt, sender, id) > (?, ?, ?) AND (sentAt, sender, id) < (?, ?, ?)
                """)
            func count(after a: Key?, before b: Key?) throws -> Int {
                switch (a, b) {
                case (let a?, let b?):
                    return try Int.fetchOne(between, arguments: [conversation, a.sentAt, a.sender, a.id, b.sentAt, b.sender, b.id]) ?? 0
                case (let a?, nil):
                    return try Int.fetchOne(db.cached("""
                        SELECT COUNT(*) FROM message WHERE conversation = ? AND (sentAt, sender, id) > (?, ?, ?)
                        """), arguments: [conversation, a.sentAt, a.sender, a.id]) ?? 0
                case (nil, let b?):
                    return try Int.fetchOne(db.cached("""
                        SELECT COUNT(*) FROM message WHERE conversation = ? AND (sentAt, sender, id) < (?, ?, ?)
                        """), arguments: [conversation, b.sentAt, b.sender, b.id]) ?? 0
                case (nil, nil):
                    preconditionFailure("a position is counted from a message")
                }
            }
            if countingFromEnd {
                let total = try Int.fetchOne(db.cached("SELECT messageCount FROM conversation WHERE id = ?"), arguments: [conversation]) ?? 0
                guard let last = sorted.last else { continue }
                var position = total - 1 - (try count(after: last, before: nil))
                positions[last.id] = position
                for index in stride(from: sorted.count - 2, through: 0, by: -1) {
                    position -= 1 + (try count(after: sorted[index], before: sorted[index + 1]))
                    positions[sorted[index].id] = position
                }
            } else {
                var position = try count(after: nil, before: sorted[0])
                positions[sorted[0].id] = position
                for index in sorted.indices.dropFirst() {
                    position += 1 + (try count(after: sorted[index - 1], before: sorted[index]))
                    positions[sorted[index].id] = position
                }
            }
        }

        // Delivery failures of the local user's messages (local facts, `Store+Failures`).
        let failures = try failureReasons(of: keys.map(\.id), in: db)
        return try rows.enumerated().map { index, row in
            let key = keys[index]
            let (status, reasons) = overlay(statuses[numbers[index]] ?? [:], failures: failures[key.id])
            // Every key was given a position above, from its conversation's group.
            guard let position = positions[key.id] else {
                throw StoreError(.damagedStore, "message \(key.id.hexPrefix) has no position in its conversation")
            }
            return MessageSnapshot(
                try Stored.operationID(key.id, "message.id"), conversation: try Stored.conversationID(key.conversation, "message.conversation"),
                postedTo: try row.conversationID(2, "message.postedTo"),
                sender: try Stored.userID(key.sender, "message.sender"), sentAt: HLCTimestamp(databaseValue: key.sentAt),
                parts: parts[numbers[index]] ?? [],
                options: MessageOptions(
                    notificationText: try row.optionalText(5, "message.notificationText"),
                    notificationSound: try row.optionalText(6, "message.notificationSound")),
                position: position, recipientStatus: status, failureReasons: reasons)
        }
    }

    // MARK: - The operation log

    /// The accepted operations of one conversation log (this identifier, not its merge group),
    /// in the order they were applied, which respects causality: what a peer needs to sync it.
    public func operations(in conversation: ConversationID) throws -> [SignedOperation] {
        try database.read { db in
            try Row.fetchAll(db.cached("""
                SELECT id, wire FROM operation WHERE conversation = ? AND status = 'accepted' ORDER BY appliedOrder
                """), arguments: [Data(conversation.bytes)]).map(Self.decodeOperation)
        }
    }

    /// How many operations the log holds with each status: accepted, pending, rejected.
    public func operationCounts() throws -> (accepted: Int, pending: Int, rejected: Int) {
        try database.read { db in
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(db.cached("SELECT status, COUNT(*) FROM operation GROUP BY status")) {
                counts[try row.text(0, "operation.status")] = try row.count(1, "COUNT(*) of operation")
            }
            return (counts["accepted"] ?? 0, counts["pending"] ?? 0, counts["rejected"] ?? 0)
        }
    }
}

extension Array {
    /// Consecutive slices of at most `size` elements (SQLite limits bound parameters).
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min(count, $0 + size)] }
    }
}
