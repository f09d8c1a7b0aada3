/// The type byte of a sync message (SPEC.md §14.2). Each type's body is in §14.3–§14.8,
/// §14.11 and §14.12.
public enum SyncMessageType: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Range-based set reconciliation (§14.3): the body belongs to the reconciler.
    case have = 0x01
    /// Per conversation, what the sender holds, asking for what lies beyond it (§14.5).
    case want = 0x02
    /// Signed operations (§14.6).
    case operations = 0x03
    /// Operations the sender has stored, by slot (the acknowledgement that makes a message *sent*, §14.7).
    case stored = 0x04
    /// Lazy push: operations the sender holds, announced by slot and identifier (§14.8).
    case ihave = 0x05
    /// "Stop eager-pushing to me" (§14.8).
    case prune = 0x06
    /// Each published log's digest: the simple reconciliation for small stores (§14.4).
    case summary = 0x07
    /// Another sync message, compressed in the connection's zstd stream (§14.11). Read by
    /// `SyncStreamDecoder`, never by `SyncMessage(payload:)`.
    case compressed = 0x08
    /// Display names of users the sender knows (§14.12). Sent only to a node whose node info
    /// has the *names* feature bit (§3.3).
    case names = 0x09

    public var description: String {
        switch self {
        case .have: "HAVE"
        case .want: "WANT"
        case .operations: "OPERATIONS"
        case .stored: "STORED"
        case .ihave: "IHAVE"
        case .prune: "PRUNE"
        case .summary: "SUMMARY"
        case .compressed: "COMPRESSED"
        case .names: "NAMES"
        }
    }
}
