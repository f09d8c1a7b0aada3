import WeftWire

/// A sync message that cannot be read or written (SPEC.md §14.1). A struct over a private
/// enum, so new cases do not break users; each carries the ERROR code a node closes the
/// connection with when a peer sent it.
public struct SyncMessageError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case empty
        case unknownType(UInt8)
        case tooLarge(Int)
    }

    private let kind: Kind
    private init(_ kind: Kind) { self.kind = kind }

    /// A DATA payload with no type byte.
    public static let empty = Self(.empty)
    /// A type byte this version does not know.
    public static func unknownType(_ type: UInt8) -> Self { Self(.unknownType(type)) }
    /// A body of `byteCount` bytes, over `SyncEnvelope.maxBodyByteCount`.
    public static func tooLarge(_ byteCount: Int) -> Self { Self(.tooLarge(byteCount)) }

    /// The code of the ERROR frame that answers this input from a peer.
    public var code: ErrorCode {
        switch kind {
        case .empty, .tooLarge: .malformedSyncMessage
        case .unknownType: .unknownSyncMessageType
        }
    }

    public var description: String {
        switch kind {
        case .empty: "malformed sync message: an empty DATA payload has no message type"
        case .unknownType(let type):
            "unknown sync message type 0x\(type < 16 ? "0" : "")\(String(type, radix: 16))"
        case .tooLarge(let count):
            "a sync message body of \(count) bytes is over the limit of \(SyncEnvelope.maxBodyByteCount)"
        }
    }
}

extension ErrorCode {
    /// A DATA payload that is not a sync message (SPEC.md §14.1).
    public static let malformedSyncMessage = ErrorCode(rawValue: 6)
    /// A sync message whose type this version does not know (SPEC.md §14.1).
    public static let unknownSyncMessageType = ErrorCode(rawValue: 7)
}
