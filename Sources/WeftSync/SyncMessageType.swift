/// The type byte of a sync message (SPEC.md §14.2). Replication assigns each type its body;
/// the envelope carries bodies as they are.
public enum SyncMessageType: UInt8, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// A summary of the operations the sender holds, for reconciliation.
    case have = 0x01
    /// Operations (or ranges of them) the sender asks for.
    case want = 0x02
    /// Signed operations.
    case operations = 0x03
    /// Operations the sender has stored (the acknowledgement that makes a message *sent*).
    case stored = 0x04

    public var description: String {
        switch self {
        case .have: "HAVE"
        case .want: "WANT"
        case .operations: "OPERATIONS"
        case .stored: "STORED"
        }
    }
}
