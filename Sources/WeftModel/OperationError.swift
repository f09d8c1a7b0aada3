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
