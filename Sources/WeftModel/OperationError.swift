/// Why an operation was refused. Every refusal leaves the state untouched and can be logged.
public struct OperationError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Reason: Hashable, Sendable {
        case malformed
        case badSignature
        case wrongHash
        case unknownVersion
        case unknownKind
        case impossibleSequence
        case timestampInFuture
        case timestampNotAfterCauses
        case notAParticipant
        case unknownConversation
        case conflictingCreation
        case dependsOnRejected
        case invalidReference
        case notPermitted
        case equivocation
        /// Not stored: it waits for causes and is past the store's bounds for such operations
        /// (stamped too long ago, or its log holds too many). It may be offered again later.
        case pendingLimit
    }

    public let reason: Reason
    public let detail: String

    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    static func malformed(_ detail: String) -> Self { Self(.malformed, detail) }

    public var description: String { detail }
}
