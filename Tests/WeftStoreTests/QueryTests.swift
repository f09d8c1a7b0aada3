import Foundation
import GRDB
import Testing
import WeftCrypto
import WeftModel
@testable import WeftStore

/// The queries' meaning, written over the replica's snapshots in plain Swift: the store's SQL
/// must return exactly this. nil means the combination is unsupported (the store must throw).
struct ReferenceQueries {
    let replica: Replica

    // MARK: - Comparing

    static func compare<T: Comparable>(_ actual: T?, _ op: PredicateOperator, _ value: QueryValue, _ extract: (QueryValue) -> T?) -> Bool? {
        switch op {
        case .contains:
            return nil
        case .in:
            guard case .list(let values) = value else { return nil }
            let items = values.map(extract)
            guard items.allSatisfy({ $0 != nil }) else { return nil }
            guard let actual else { return false }
            return items.contains { $0! == actual }
        default:
            guard let expected = extract(value) else { return nil }
            guard let actual else { return false }
            switch op {
            case .equal: return actual == expected
            case .notEqual: return actual != expected
            case .less: return actual < expected
            case .lessOrEqual: return actual <= expected
            case .greater: return actual > expected
            case .greaterOrEqual: return actual >= expected
            case .in, .contains: return nil
            }
        }
    }

    static func boolean(_ actual: Bool, _ op: PredicateOperator, _ value: QueryValue) -> Bool? {
        switch op {
        case .equal, .notEqual, .in: compare(actual ? 1 : 0, op, value) { if case .bool(let b) = $0 { b ? 1 : 0 } else { nil } }
        default: nil
        }
    }

    static func bytes(_ bytes: [UInt8]) -> Bytes { Bytes(bytes) }

    struct Bytes: Comparable {
        let value: [UInt8]
        init(_ value: [UInt8]) { self.value = value }
        static func < (a: Bytes, b: Bytes) -> Bool { a.value.lexicographicallyPrecedes(b.value) }
    }

    static func conversationID(_ value: QueryValue) -> Bytes? { if case .conversation(let id) = value { Bytes(id.bytes) } else { nil } }
    static func messageID(_ value: QueryValue) -> Bytes? { if case .message(let id) = value { Bytes(id.bytes) } else { nil } }
    static func user(_ value: QueryValue) -> Bytes? { if case .user(let user) = value { Bytes(user.bytes) } else { nil } }
    static func timestamp(_ value: QueryValue) -> UInt64? { if case .timestamp(let t) = value { t.rawValue } else { nil } }
    static func int(_ value: QueryValue) -> Int? { if case .int(let n) = value { n } else { nil } }

    /// A conversation identifier in a predicate: equality and `in` resolve merges.
    func conversationMatches(_ canonical: ConversationID, _ op: PredicateOperator, _ value: QueryValue) -> Bool? {
        // Outer nil: not a conversation identifier; inner nil: no such conversation.
        func resolve(_ value: QueryValue) -> ConversationID?? {
            guard case .conversation(let id) = value else { return nil }
            return .some(replica.shows(id) ? replica.conversation(id)?.id : nil)
        }
        switch op {
        case .equal, .notEqual:
            guard let target = resolve(value) else { return nil }
            guard let target else { return op == .notEqual }
            return (canonical == target) == (op == .equal)
        case .in:
            guard case .list(let values) = value else { return nil }
            var targets: [ConversationID?] = []
            for value in values {
                guard let target = resolve(value) else { return nil }
                targets.append(target)
            }
            return targets.contains(canonical)
        default:
            return Self.compare(Bytes(canonical.bytes), op, value, Self.conversationID)
        }
    }

    // MARK: - Conversations

    func matches(_ c: ConversationSnapshot, _ p: ConversationPredicate) -> Bool? {
        switch p.property {
        case .identifier:
            return conversationMatches(c.id, p.operator, p.value)
        case .participants:
            switch (p.operator, p.value) {
            case (.contains, .user(let user)): return c.participants.contains(user)
            case (.equal, .list(let values)), (.notEqual, .list(let values)):
                var users: Set<UserID> = []
                for value in values {
                    guard case .user(let user) = value else { return nil }
                    users.insert(user)
                }
                return (Set(c.participants) == users) == (p.operator == .equal)
            default: return nil
            }
        case .createdAt: return Self.compare(c.createdAt.rawValue, p.operator, p.value, Self.timestamp)
        case .lastMessageAt: return Self.compare(c.lastMessageAt?.rawValue, p.operator, p.value, Self.timestamp)
        case .isDistinct: return Self.boolean(c.isDistinct, p.operator, p.value)
        case .messageCount: return Self.compare(c.messageCount, p.operator, p.value, Self.int)
        case .unreadCount: return Self.compare(c.unreadCount, p.operator, p.value, Self.int)
        }
    }

    /// -1, 0, 1 for one sort key.
    static func order<T: Comparable>(_ a: T?, _ b: T?) -> Int {
        switch (a, b) {
        case (nil, nil): 0
        case (nil, _): -1
        case (_, nil): 1
        case (let a?, let b?): a < b ? -1 : (b < a ? 1 : 0)
        }
    }

    func conversations(_ query: ConversationQuery) -> [ConversationSnapshot]? {
        var result: [ConversationSnapshot] = []
        for c in replica.conversations where replica.shows(c.id) {
            var keep = true
            for predicate in query.predicates {
                guard let match = matches(c, predicate) else { return nil }
                keep = keep && match
            }
            if keep { result.append(c) }
        }
        for descriptor in query.sort where descriptor.property == .participants { _ = descriptor; return nil }
        result.sort { a, b in
            for descriptor in query.sort {
                let o: Int =
                    switch descriptor.property {
                    case .identifier: Self.order(Bytes(a.id.bytes), Bytes(b.id.bytes))
                    case .createdAt: Self.order(a.createdAt, b.createdAt)
                    case .lastMessageAt: Self.order(a.lastMessageAt, b.lastMessageAt)
                    case .isDistinct: Self.order(a.isDistinct ? 1 : 0, b.isDistinct ? 1 : 0)
                    case .messageCount: Self.order(a.messageCount, b.messageCount)
                    case .unreadCount: Self.order(a.unreadCount, b.unreadCount)
                    case .participants: 0
                    }
                if o != 0 { return descriptor.ascending ? o < 0 : o > 0 }
            }
            return a.id < b.id
        }
        return Self.window(result, query)
    }

    static func window<T>(_ items: [T], _ query: Query<some Hashable & Sendable>) -> [T] {
        let rest = items.dropFirst(query.offset)
        return Array(query.limit.map { rest.prefix($0) } ?? rest)
    }

    // MARK: - Messages

    /// The messages of the conversations the store shows (SPEC.md §14.9).
    var allMessages: [MessageSnapshot] { replica.conversationIDs.filter(replica.shows).flatMap { replica.messages(in: $0) } }

    func matches(_ m: MessageSnapshot, _ p: MessagePredicate) -> Bool? {
        switch p.property {
        case .identifier: return Self.compare(Bytes(m.id.bytes), p.operator, p.value, Self.messageID)
        case .conversation: return conversationMatches(m.conversation, p.operator, p.value)
        case .sender: return Self.compare(Bytes(m.sender.bytes), p.operator, p.value, Self.user)
        case .sentAt: return Self.compare(m.sentAt.rawValue, p.operator, p.value, Self.timestamp)
        case .isUnread: return Self.boolean(replica.isUnread(m.id, postedTo: m.postedTo), p.operator, p.value)
        case .position: return Self.compare(m.position, p.operator, p.value, Self.int)
        case .mimeType:
            let types = Set(m.parts.map(\.mimeType))
            switch (p.operator, p.value) {
            case (.contains, .string(let type)), (.equal, .string(let type)): return types.contains(type)
            case (.notEqual, .string(let type)): return !types.contains(type)
            case (.in, .list(let values)):
                var wanted: Set<String> = []
                for value in values {
                    guard case .string(let type) = value else { return nil }
                    wanted.insert(type)
                }
                return !types.isDisjoint(with: wanted)
            default: return nil
            }
        }
    }

    func messages(_ query: MessageQuery) -> [MessageSnapshot]? {
        var result: [MessageSnapshot] = []
        for m in allMessages {
            var keep = true
            for predicate in query.predicates {
                guard let match = matches(m, predicate) else { return nil }
                keep = keep && match
            }
            if keep { result.append(m) }
        }
        if query.sort.contains(where: { $0.property == .mimeType }) { return nil }
        result.sort { a, b in
            for descriptor in query.sort {
                let o: Int =
                    switch descriptor.property {
                    case .identifier: Self.order(Bytes(a.id.bytes), Bytes(b.id.bytes))
                    case .conversation: Self.order(Bytes(a.conversation.bytes), Bytes(b.conversation.bytes))
                    case .sender: Self.order(Bytes(a.sender.bytes), Bytes(b.sender.bytes))
                    case .sentAt: Self.order(a.sentAt, b.sentAt)
                    case .isUnread:
                        Self.order(
                            replica.isUnread(a.id, postedTo: a.postedTo) ? 1 : 0, replica.isUnread(b.id, postedTo: b.postedTo) ? 1 : 0)
                    case .position: Self.order(a.position, b.position)
                    case .mimeType: 0
                    }
                if o != 0 { return descriptor.ascending ? o < 0 : o > 0 }
            }
            return a.id < b.id
        }
        return Self.window(result, query)
    }
}

@Suite("Store: queries against a reference filter")
struct QueryTests {
    static let operators: [PredicateOperator] = [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual, .in, .contains]

    /// A store and the replica it must agree with, after a random workload.
    static func fixture() async throws -> (Store, Replica, Workload) {
        var workload = Workload(seed: 21)
        workload.run(steps: 350)
        workload.gossipAll()
        let store = try Store(directory: nil, localUser: workload.users[0])
        _ = try await store.apply(received: workload.operations, wallMilliseconds: workload.now)
        return (store, try store.replica, workload)
    }

    /// Sample values of each kind, taken from the data (so comparisons split it) plus misses.
    static func values(_ replica: Replica, _ workload: Workload) -> [QueryValue] {
        let conversations = replica.conversations.filter { replica.shows($0.id) }
        let messages = conversations.flatMap { replica.messages(in: $0.id) }
        let merged = conversations.first { !$0.mergedIDs.isEmpty }
        var values: [QueryValue] = [
            .conversation(conversations[conversations.count / 2].id),
            .conversation(ConversationID(bytes: [UInt8](repeating: 0x80, count: 16))!),
            .message(messages[messages.count / 3].id),
            .user(workload.users[1]), .user(workload.users[0]),
            .timestamp(messages[messages.count / 2].sentAt),
            .timestamp(conversations[conversations.count / 3].createdAt),
            .bool(true), .bool(false),
            .int(0), .int(2), .int(7),
            .string("text/plain"), .string("video/mp4"),
            .list([.conversation(conversations[0].id), .conversation(conversations.last!.id)]),
            .list([.message(messages[0].id), .message(messages.last!.id)]),
            .list([.user(workload.users[2]), .user(workload.users[3])]),
            .list([.timestamp(messages[1].sentAt), .timestamp(conversations[0].createdAt)]),
            .list([.int(1), .int(3)]), .list([.bool(true)]),
            .list([.string("image/png"), .string("application/json; charset=utf-8")]),
            .list(conversations[1].participants.map { .user($0) }),
            .list([]),
        ]
        if let merged {
            values.append(.conversation(merged.mergedIDs[0]))
            values.append(.list([.conversation(merged.mergedIDs[0])]))
        }
        return values
    }

    @Test("every conversation predicate operator and value kind: the SQL returns what the reference filter does, or throws unsupportedQuery where the reference has no meaning")
    func conversationPredicates() async throws {
        let (store, replica, workload) = try await Self.fixture()
        let reference = ReferenceQueries(replica: replica)
        let properties: [ConversationProperty] = [.identifier, .participants, .createdAt, .lastMessageAt, .isDistinct, .messageCount, .unreadCount]
        var supported = 0
        for property in properties {
            for op in Self.operators {
                for value in Self.values(replica, workload) {
                    let query = ConversationQuery([.init(property, op, value)])
                    if let expected = reference.conversations(query) {
                        supported += 1
                        let actual = try store.conversations(query)
                        #expect(actual.map(\.id) == expected.map(\.id), "\(property) \(op) \(value)")
                        #expect(try store.count(query) == expected.count, "count \(property) \(op) \(value)")
                    } else {
                        let error = #expect(throws: StoreError.self, "\(property) \(op) \(value)") { try store.conversations(query) }
                        #expect(error?.code == .unsupportedQuery)
                        #expect(error?.message.isEmpty == false)
                    }
                }
            }
        }
        #expect(supported > 80)
    }

    @Test("every message predicate operator and value kind, against the reference filter")
    func messagePredicates() async throws {
        let (store, replica, workload) = try await Self.fixture()
        let reference = ReferenceQueries(replica: replica)
        let properties: [MessageProperty] = [.identifier, .conversation, .sender, .sentAt, .isUnread, .mimeType, .position]
        var supported = 0
        for property in properties {
            for op in Self.operators {
                for value in Self.values(replica, workload) {
                    let query = MessageQuery([.init(property, op, value)])
                    if let expected = reference.messages(query) {
                        supported += 1
                        let actual = try store.messages(query)
                        #expect(actual.map(\.id) == expected.map(\.id), "\(property) \(op) \(value)")
                        #expect(actual == expected, "snapshots for \(property) \(op) \(value)")
                        #expect(try store.count(query) == expected.count, "count \(property) \(op) \(value)")
                    } else {
                        let error = #expect(throws: StoreError.self, "\(property) \(op) \(value)") { try store.messages(query) }
                        #expect(error?.code == .unsupportedQuery)
                    }
                }
            }
        }
        #expect(supported > 80)
    }

    @Test("sorting by every sortable property both ways, ties broken by identifier, with offsets and limits; combined predicates")
    func sortingAndWindows() async throws {
        let (store, replica, workload) = try await Self.fixture()
        let reference = ReferenceQueries(replica: replica)
        let windows: [(Int?, Int)] = [(nil, 0), (5, 0), (5, 3), (nil, 4), (0, 0), (1000, 1000)]
        for property in [ConversationProperty.identifier, .createdAt, .lastMessageAt, .isDistinct, .messageCount, .unreadCount] {
            for ascending in [true, false] {
                for (limit, offset) in windows {
                    let query = ConversationQuery(
                        [.init(.messageCount, .greaterOrEqual, .int(0))], sort: [.init(property, ascending: ascending)], limit: limit, offset: offset)
                    let expected = try #require(reference.conversations(query))
                    #expect(try store.conversations(query).map(\.id) == expected.map(\.id), "\(property) \(ascending) \(String(describing: limit)) \(offset)")
                    #expect(try store.count(query) == expected.count)
                }
            }
        }
        let busiest = replica.conversations.filter { replica.shows($0.id) }.max { $0.messageCount < $1.messageCount }!
        for property in [MessageProperty.identifier, .conversation, .sender, .sentAt, .isUnread, .position] {
            for ascending in [true, false] {
                for (limit, offset) in windows {
                    for pinned in [true, false] {
                        let predicates: [MessagePredicate] = pinned ? [.init(.conversation, .equal, .conversation(busiest.id))] : []
                        let query = MessageQuery(predicates, sort: [.init(property, ascending: ascending)], limit: limit, offset: offset)
                        let expected = try #require(reference.messages(query))
                        let actual = try store.messages(query)
                        #expect(actual.map(\.id) == expected.map(\.id), "\(property) \(ascending) \(String(describing: limit)) \(offset) \(pinned)")
                        #expect(actual.map(\.position) == expected.map(\.position))
                    }
                }
            }
        }
        // Pages of one conversation in position order near its end (read backwards) and near
        // its start, against the reference.
        let inBusiest = MessagePredicate(.conversation, .equal, .conversation(busiest.id))
        for offset in [0, 1, busiest.messageCount / 2, busiest.messageCount / 2 + 1, busiest.messageCount - 3, busiest.messageCount - 1, busiest.messageCount, busiest.messageCount + 2] {
            for limit in [1, 2, 10] {
                let query = MessageQuery([inBusiest], sort: [.init(.position)], limit: limit, offset: offset)
                let expected = try #require(reference.messages(query))
                #expect(try store.messages(query) == expected, "offset \(offset), limit \(limit) of \(busiest.messageCount)")
            }
        }
        // Two keys, and several predicates at once.
        let query = MessageQuery(
            [
                .init(.sender, .notEqual, .user(workload.users[0])), .init(.mimeType, .contains, .string("text/plain")),
                .init(.position, .greaterOrEqual, .int(1)),
            ],
            sort: [.init(.isUnread, ascending: false), .init(.sentAt)], limit: 20, offset: 2)
        #expect(try store.messages(query) == reference.messages(query))
        let unsupported = #expect(throws: StoreError.self) { try store.messages(MessageQuery(sort: [.init(.mimeType)])) }
        #expect(unsupported?.code == .unsupportedQuery)
        let negative = #expect(throws: StoreError.self) { try store.messages(MessageQuery(limit: -1)) }
        #expect(negative?.code == .unsupportedQuery)
    }

    @Test("the latest messages of a conversation use the order index (no table scan, no sort)")
    func latestMessagesPlan() async throws {
        let (store, replica, _) = try await Self.fixture()
        let busiest = replica.conversations.filter { replica.shows($0.id) }.max { $0.messageCount < $1.messageCount }!
        let query = MessageQuery(
            [.init(.conversation, .equal, .conversation(busiest.id))], sort: [.init(.position, ascending: false)], limit: 10)
        let plan = try await store.database.read { db in
            let sql = try QueryTranslation.select(query, columns: MessageQueries.columns, in: db)
            return try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql.text, arguments: sql.arguments).map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("message_on_conversation_order") }, "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
        #expect(try store.messages(query) == Array(replica.messages(in: busiest.id).suffix(10).reversed()))
    }
}

