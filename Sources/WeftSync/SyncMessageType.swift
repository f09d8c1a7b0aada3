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

    // Content transfer (§17.8). Sent only to a node whose node info has the *content* feature
    // bit (§3.3); `ContentTransferMessage` reads and writes their bodies.

    /// "Which chunks of this content do you hold?" (§17.8).
    case holdingsRequest = 0x0a
    /// The chunks of a content the sender holds verified: none, all, or a bitset (§17.8).
    case holdings = 0x0b
    /// "Send me this content's manifest" (§17.8).
    case manifestRequest = 0x0c
    /// A content's manifest (§17.4), or that the sender does not hold it (§17.8).
    case manifest = 0x0d
    /// "Send me these chunks of this content" (§17.8).
    case chunkRequest = 0x0e
    /// One chunk: the chunk message of §17.6, sent outside the connection's zstd stream.
    case chunk = 0x0f
    /// "I do not hold these chunks" (an answer to CHUNK REQUEST, §17.8).
    case notHeld = 0x10
    /// "Do not send these chunks after all" (§17.8).
    case cancel = 0x11

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
        case .holdingsRequest: "HOLDINGS REQUEST"
        case .holdings: "HOLDINGS"
        case .manifestRequest: "MANIFEST REQUEST"
        case .manifest: "MANIFEST"
        case .chunkRequest: "CHUNK REQUEST"
        case .chunk: "CHUNK"
        case .notHeld: "NOT HELD"
        case .cancel: "CANCEL"
        }
    }
}
