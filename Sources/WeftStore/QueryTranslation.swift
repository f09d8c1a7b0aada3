import Foundation
import GRDB
import WeftModel

/// Queries (`Query.swift`) as SQL over the materialized tables.
///
/// What each property accepts:
/// - ordered scalars (identifiers, `sender`, `conversation`, timestamps, counts, `position`):
///   `equal`, `notEqual`, `less`, `lessOrEqual`, `greater`, `greaterOrEqual`, and `in` with a
///   `.list`; identifiers compare by their bytes;
/// - booleans (`isDistinct`, `isUnread`): `equal`, `notEqual`, `in`;
/// - `participants`: `contains` a `.user`, or `equal`/`notEqual` a `.list` of users (the exact set);
/// - `mimeType`: `contains` or `equal` (some part has it), `notEqual` (no part has it), `in` (some
///   part has one of them).
///
/// A conversation identifier in a predicate resolves through merges: a merged conversation's
/// identifier names its canonical conversation. `lastMessageAt` of a conversation without
/// messages matches no predicate and sorts first. Every sort ends with the identifier,
/// ascending, so results are deterministic. Anything else throws `StoreError.unsupportedQuery`.
enum QueryTranslation {
    struct SQL {
        var text: String
        var arguments: StatementArguments
    }

    /// The count a query returns once its offset and limit apply to `total` matches.
    static func window(_ total: Int, _ offset: Int, _ limit: Int?) -> Int {
        let remaining = max(0, total - max(0, offset))
        return limit.map { min(max(0, $0), remaining) } ?? remaining
    }

    // MARK: - Conversations

    static func select(_ query: ConversationQuery, in db: Database) throws -> SQL {
        var sql = try conversationFilter(query, in: db)
        sql.text = "SELECT c.id FROM conversation c WHERE " + sql.text
        var order: [String] = []
        for descriptor in query.sort {
            let direction = descriptor.ascending ? "ASC" : "DESC"
            switch descriptor.property {
            case .identifier: order.append("c.id \(direction)")
            case .createdAt: order.append("c.createdAt \(direction)")
            case .lastMessageAt: order.append("c.lastMessageAt \(direction)")
            case .isDistinct: order.append("c.isDistinct \(direction)")
            case .messageCount: order.append("c.messageCount \(direction)")
            case .unreadCount: order.append("c.unreadCount \(direction)")
            case .participants: throw unsupported("conversations cannot be sorted by participants")
            }
        }
        if query.sort.last?.property != .identifier { order.append("c.id ASC") }
        sql.text += " ORDER BY " + order.joined(separator: ", ")
        try appendWindow(query.limit, query.offset, to: &sql)
        return sql
    }

    static func count(_ query: ConversationQuery, in db: Database) throws -> SQL {
        var sql = try conversationFilter(query, in: db)
        sql.text = "SELECT COUNT(*) FROM conversation c WHERE " + sql.text
        return sql
    }

    private static func conversationFilter(_ query: ConversationQuery, in db: Database) throws -> SQL {
        var clauses = ["c.canonical = c.id"]
        var arguments: [(any DatabaseValueConvertible)?] = []
        for predicate in query.predicates {
            let name = "conversation property \(predicate.property)"
            switch predicate.property {
            case .identifier:
                clauses.append(try conversationIDClause("c.id", predicate.operator, predicate.value, name, &arguments, db))
            case .participants:
                clauses.append(try participantsClause(predicate.operator, predicate.value, &arguments))
            case .createdAt:
                clauses.append(try ordered("c.createdAt", predicate.operator, predicate.value, .timestamp, name, &arguments))
            case .lastMessageAt:
                clauses.append(try ordered("c.lastMessageAt", predicate.operator, predicate.value, .timestamp, name, &arguments))
            case .isDistinct:
                clauses.append(try boolean("c.isDistinct", predicate.operator, predicate.value, name, &arguments))
            case .messageCount:
                clauses.append(try ordered("c.messageCount", predicate.operator, predicate.value, .int, name, &arguments))
            case .unreadCount:
                clauses.append(try ordered("c.unreadCount", predicate.operator, predicate.value, .int, name, &arguments))
            }
        }
        return SQL(text: clauses.map { "(\($0))" }.joined(separator: " AND "), arguments: StatementArguments(arguments))
    }

    private static func participantsClause(
        _ op: PredicateOperator, _ value: QueryValue, _ arguments: inout [(any DatabaseValueConvertible)?]
    ) throws -> String {
        switch (op, value) {
        case (.contains, .user(let user)):
            arguments.append(Data(user.bytes))
            return "EXISTS (SELECT 1 FROM participant p WHERE p.conversation = c.id AND p.user = ?)"
        case (.equal, .list(let values)), (.notEqual, .list(let values)):
            let users = try Set(values.map { value -> UserID in
                guard case .user(let user) = value else {
                    throw unsupported("participants compare with a list of users, not \(value)")
                }
                return user
            }).sorted()
            let total = "(SELECT COUNT(*) FROM participant p WHERE p.conversation = c.id)"
            var clause = "\(total) = \(users.count)"
            if !users.isEmpty {
                let marks = Array(repeating: "?", count: users.count).joined(separator: ",")
                clause += " AND (SELECT COUNT(*) FROM participant p WHERE p.conversation = c.id AND p.user IN (\(marks)))"
                    + " = \(users.count)"
                arguments += users.map { Data($0.bytes) }
            }
            return op == .equal ? clause : "NOT (\(clause))"
        default:
            throw unsupported(
                "participants take .contains with a user, or .equal/.notEqual with a list of users; not \(op) with \(value)")
        }
    }

    // MARK: - Messages

    static func select(_ query: MessageQuery, columns: String, in db: Database) throws -> SQL {
        var sql = try messageFilter(query, in: db)
        sql.text = columns + " WHERE " + sql.text
        // With a single conversation, position order is the order index itself.
        let oneConversation = query.predicates.contains { $0.property == .conversation && $0.operator == .equal }
        var order: [String] = []
        for descriptor in query.sort {
            let direction = descriptor.ascending ? "ASC" : "DESC"
            switch descriptor.property {
            case .identifier: order.append("m.id \(direction)")
            case .conversation: order.append("m.conversation \(direction)")
            case .sender: order.append("m.sender \(direction)")
            case .sentAt: order.append("m.sentAt \(direction)")
            case .isUnread: order.append("m.isUnread \(direction)")
            case .position:
                if oneConversation {
                    order += ["m.sentAt \(direction)", "m.sender \(direction)", "m.id \(direction)"]
                } else {
                    order.append("\(positionExpression) \(direction)")
                }
            case .mimeType: throw unsupported("messages cannot be sorted by MIME type")
            }
        }
        let endsWithIdentifier = query.sort.last.map { $0.property == .identifier || ($0.property == .position && oneConversation) } ?? false
        if !endsWithIdentifier { order.append("m.id ASC") }
        sql.text += " ORDER BY " + order.joined(separator: ", ")
        try appendWindow(query.limit, query.offset, to: &sql)
        return sql
    }

    static func count(_ query: MessageQuery, in db: Database) throws -> SQL {
        var sql = try messageFilter(query, in: db)
        sql.text = "SELECT COUNT(*) FROM message m WHERE " + sql.text
        return sql
    }

    /// A message's position: how many messages of its conversation come before it (SPEC.md §13.5).
    static let positionExpression = """
        (SELECT COUNT(*) FROM message o WHERE o.conversation = m.conversation \
        AND (o.sentAt, o.sender, o.id) < (m.sentAt, m.sender, m.id))
        """

    private static func messageFilter(_ query: MessageQuery, in db: Database) throws -> SQL {
        var clauses: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        for predicate in query.predicates {
            let name = "message property \(predicate.property)"
            switch predicate.property {
            case .identifier:
                clauses.append(try ordered("m.id", predicate.operator, predicate.value, .message, name, &arguments))
            case .conversation:
                clauses.append(try conversationIDClause("m.conversation", predicate.operator, predicate.value, name, &arguments, db))
            case .sender:
                clauses.append(try ordered("m.sender", predicate.operator, predicate.value, .user, name, &arguments))
            case .sentAt:
                clauses.append(try ordered("m.sentAt", predicate.operator, predicate.value, .timestamp, name, &arguments))
            case .isUnread:
                clauses.append(try boolean("m.isUnread", predicate.operator, predicate.value, name, &arguments))
            case .position:
                clauses.append(try ordered(positionExpression, predicate.operator, predicate.value, .int, name, &arguments))
            case .mimeType:
                clauses.append(try mimeTypeClause(predicate.operator, predicate.value, &arguments))
            }
        }
        if clauses.isEmpty { clauses.append("1") }
        return SQL(text: clauses.map { "(\($0))" }.joined(separator: " AND "), arguments: StatementArguments(arguments))
    }

    private static func mimeTypeClause(
        _ op: PredicateOperator, _ value: QueryValue, _ arguments: inout [(any DatabaseValueConvertible)?]
    ) throws -> String {
        let exists = "EXISTS (SELECT 1 FROM part p WHERE p.message = m.number AND p.mimeType"
        switch (op, value) {
        case (.contains, .string(let type)), (.equal, .string(let type)):
            arguments.append(type)
            return "\(exists) = ?)"
        case (.notEqual, .string(let type)):
            arguments.append(type)
            return "NOT \(exists) = ?)"
        case (.in, .list(let values)):
            let types = try values.map { value -> String in
                guard case .string(let type) = value else { throw unsupported("MIME types are strings, not \(value)") }
                return type
            }
            arguments += types
            return "\(exists) IN (\(Array(repeating: "?", count: types.count).joined(separator: ","))))"
        default:
            throw unsupported("mimeType takes .contains, .equal or .notEqual with a string, or .in with strings; not \(op) with \(value)")
        }
    }

    // MARK: - Shared pieces

    enum Kind: CustomStringConvertible {
        case conversation, message, user, timestamp, bool, int

        var description: String {
            switch self {
            case .conversation: "a conversation identifier"
            case .message: "a message identifier"
            case .user: "a user"
            case .timestamp: "a timestamp"
            case .bool: "a Boolean"
            case .int: "an integer"
            }
        }
    }

    /// The SQLite value of `value`, which must be of `kind`.
    private static func databaseValue(_ value: QueryValue, _ kind: Kind, _ name: String) throws -> any DatabaseValueConvertible {
        switch (kind, value) {
        case (.conversation, .conversation(let id)): return Data(id.bytes)
        case (.message, .message(let id)): return Data(id.bytes)
        case (.user, .user(let user)): return Data(user.bytes)
        case (.timestamp, .timestamp(let timestamp)): return timestamp.databaseValue
        case (.bool, .bool(let flag)): return flag
        case (.int, .int(let number)): return number
        default: throw unsupported("\(name) compares with \(kind), not \(value)")
        }
    }

    private static func comparison(_ op: PredicateOperator) -> String? {
        switch op {
        case .equal: "="
        case .notEqual: "!="
        case .less: "<"
        case .lessOrEqual: "<="
        case .greater: ">"
        case .greaterOrEqual: ">="
        case .in, .contains: nil
        }
    }

    /// A scalar property with an order: every comparison, and `in`.
    private static func ordered(
        _ column: String, _ op: PredicateOperator, _ value: QueryValue, _ kind: Kind, _ name: String,
        _ arguments: inout [(any DatabaseValueConvertible)?]
    ) throws -> String {
        if op == .in {
            guard case .list(let values) = value else { throw unsupported("\(name) takes .in with a list, not \(value)") }
            arguments += try values.map { try databaseValue($0, kind, name) }
            return "\(column) IN (\(Array(repeating: "?", count: values.count).joined(separator: ",")))"
        }
        guard let symbol = comparison(op) else {
            throw unsupported("\(name) is not a collection: .contains does not apply (use .equal or .in)")
        }
        arguments.append(try databaseValue(value, kind, name))
        return "\(column) \(symbol) ?"
    }

    private static func boolean(
        _ column: String, _ op: PredicateOperator, _ value: QueryValue, _ name: String,
        _ arguments: inout [(any DatabaseValueConvertible)?]
    ) throws -> String {
        switch op {
        case .equal, .notEqual, .in:
            return try ordered(column, op, value, .bool, name, &arguments)
        case .less, .lessOrEqual, .greater, .greaterOrEqual, .contains:
            throw unsupported("\(name) is a Boolean: it takes .equal, .notEqual or .in, not \(op)")
        }
    }

    /// A conversation identifier: equality and `in` resolve merged identifiers to their
    /// canonical conversation; order comparisons use the canonical identifier's bytes.
    private static func conversationIDClause(
        _ column: String, _ op: PredicateOperator, _ value: QueryValue, _ name: String,
        _ arguments: inout [(any DatabaseValueConvertible)?], _ db: Database
    ) throws -> String {
        func resolved(_ value: QueryValue) throws -> Data? {
            guard case .conversation(let id) = value else {
                throw unsupported("\(name) compares with \(Kind.conversation), not \(value)")
            }
            return try ConversationQueries.canonical(of: id, in: db).map { Data($0.bytes) }
        }
        switch op {
        case .equal, .notEqual:
            guard let canonical = try resolved(value) else { return op == .equal ? "0" : "1" }
            arguments.append(canonical)
            return "\(column) \(op == .equal ? "=" : "!=") ?"
        case .in:
            guard case .list(let values) = value else { throw unsupported("\(name) takes .in with a list, not \(value)") }
            let ids = try values.compactMap(resolved)
            arguments += ids
            return "\(column) IN (\(Array(repeating: "?", count: ids.count).joined(separator: ",")))"
        default:
            return try ordered(column, op, value, .conversation, name, &arguments)
        }
    }

    private static func appendWindow(_ limit: Int?, _ offset: Int, to sql: inout SQL) throws {
        guard offset >= 0, (limit ?? 0) >= 0 else {
            throw unsupported("a query's limit and offset cannot be negative (limit \(limit.map(String.init) ?? "none"), offset \(offset))")
        }
        sql.text += " LIMIT \(limit ?? -1) OFFSET \(offset)"
    }

    static func unsupported(_ message: String) -> StoreError { StoreError(.unsupportedQuery, message) }
}
