import WeftModel

/// A value a predicate compares against.
public enum QueryValue: Hashable, Sendable {
    case user(UserID)
    case conversation(ConversationID)
    case message(OperationID)
    case timestamp(HLCTimestamp)
    case bool(Bool)
    case int(Int)
    case string(String)
    /// For `.in`: any of these.
    case list([QueryValue])
}

/// How a predicate compares (the SDK's predicate operators).
public enum PredicateOperator: Hashable, Sendable {
    case equal, notEqual, less, lessOrEqual, greater, greaterOrEqual
    /// The property equals one of the values of a `.list`.
    case `in`
    /// A collection property (participants, MIME types) holds the value.
    case contains
}

/// Properties of conversations a query can filter and sort on.
public enum ConversationProperty: Hashable, Sendable {
    case identifier
    case participants
    case createdAt
    case lastMessageAt
    case isDistinct
    case messageCount
    case unreadCount
}

/// Properties of messages a query can filter and sort on.
public enum MessageProperty: Hashable, Sendable {
    case identifier
    /// The canonical conversation (merges resolved).
    case conversation
    case sender
    case sentAt
    /// Unread by the local user.
    case isUnread
    /// One of the message's parts has this MIME type (use `.contains` or `.equal`).
    case mimeType
    /// Position in the conversation's order.
    case position
}

public struct Predicate<Property: Hashable & Sendable>: Hashable, Sendable {
    public var property: Property
    public var `operator`: PredicateOperator
    public var value: QueryValue

    public init(_ property: Property, _ op: PredicateOperator, _ value: QueryValue) {
        self.property = property
        self.operator = op
        self.value = value
    }
}

public struct SortDescriptor<Property: Hashable & Sendable>: Hashable, Sendable {
    public var property: Property
    public var ascending: Bool

    public init(_ property: Property, ascending: Bool = true) {
        self.property = property
        self.ascending = ascending
    }
}

/// A query: every predicate must hold (AND); results sorted, then offset and limit applied.
/// Ties after the given sort are broken by identifier, so results are deterministic.
public struct Query<Property: Hashable & Sendable>: Hashable, Sendable {
    public var predicates: [Predicate<Property>]
    public var sort: [SortDescriptor<Property>]
    public var limit: Int?
    public var offset: Int

    public init(
        _ predicates: [Predicate<Property>] = [], sort: [SortDescriptor<Property>] = [], limit: Int? = nil, offset: Int = 0
    ) {
        self.predicates = predicates
        self.sort = sort
        self.limit = limit
        self.offset = offset
    }
}

public typealias ConversationQuery = Query<ConversationProperty>
public typealias MessageQuery = Query<MessageProperty>

// Foundation has its own `Predicate` and `SortDescriptor`: these names need no module prefix
// in files that import Foundation too.
public typealias ConversationPredicate = Predicate<ConversationProperty>
public typealias MessagePredicate = Predicate<MessageProperty>
public typealias ConversationSort = SortDescriptor<ConversationProperty>
public typealias MessageSort = SortDescriptor<MessageProperty>
