/// Why a DNS message (RFC 1035 §4, as multicast DNS uses it, RFC 6762 §18) was refused. A
/// node drops such a packet and keeps listening: whatever arrives on the multicast group,
/// from anyone, goes through the decoder.
public struct DNSMessageError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Reason: Hashable, Sendable {
        /// A field or a count runs past the end of the packet.
        case truncated
        /// A compression pointer that does not point back into what came before it, or a
        /// chain of them that does not end.
        case badPointer
        /// A label over 63 bytes, a name over 255, or a label kind that is not assigned.
        case badName
        /// Record data that does not parse as its type says (a wrong length, bytes left over).
        case badRecord
    }

    public let reason: Reason
    public let detail: String

    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { detail }
}
