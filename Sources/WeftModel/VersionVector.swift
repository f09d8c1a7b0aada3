/// For each author, the highest sequence number in an operation's causal past (itself
/// included). Since each author's operations in a conversation form a chain, `a` happened
/// before `b` exactly when `b`'s vector reaches `a`'s sequence number for `a`'s author.
public struct VersionVector: Hashable, Sendable {
    public private(set) var entries: [UserID: UInt64] = [:]

    public init() {}

    public subscript(author: UserID) -> UInt64 { entries[author] ?? 0 }

    public mutating func formJoin(_ other: VersionVector) {
        for (author, sequence) in other.entries where sequence > self[author] { entries[author] = sequence }
    }

    mutating func record(_ author: UserID, _ sequence: UInt64) {
        if sequence > self[author] { entries[author] = sequence }
    }

    /// Sets an author's entry, up or down (a summary's heads are rebuilt, not only joined);
    /// zero removes it.
    public mutating func set(_ author: UserID, _ sequence: UInt64) {
        entries[author] = sequence == 0 ? nil : sequence
    }

    /// Whether the operation `(author, sequence)` is in the past this vector describes.
    public func includes(author: UserID, sequence: UInt64) -> Bool { self[author] >= sequence }
}
