import WeftWire

/// A sync message that cannot be read or written (SPEC.md §14.1). A struct over a private
/// enum, so new cases do not break users; each carries the ERROR code a node closes the
/// connection with when a peer sent it.
public struct SyncMessageError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case empty
        case unknownType(UInt8)
        case tooLarge(Int)
        case truncated(SyncMessageType)
        case trailingBytes(SyncMessageType, Int)
        case invalidBody(SyncMessageType, String)
        case invalidOperation(index: Int, String)
        case invalidCompression(String)
        case listTooLong(SyncMessageType, Int)
    }

    private let kind: Kind
    private init(_ kind: Kind) { self.kind = kind }

    /// A DATA payload with no type byte.
    public static let empty = Self(.empty)
    /// A type byte this version does not know.
    public static func unknownType(_ type: UInt8) -> Self { Self(.unknownType(type)) }
    /// A body of `byteCount` bytes, over `SyncEnvelope.maxBodyByteCount`.
    public static func tooLarge(_ byteCount: Int) -> Self { Self(.tooLarge(byteCount)) }
    /// A body that ends inside a field, or whose count promises more entries than it holds.
    public static func truncated(_ type: SyncMessageType) -> Self { Self(.truncated(type)) }
    /// A body with `count` bytes left after its last field.
    public static func trailingBytes(_ type: SyncMessageType, _ count: Int) -> Self { Self(.trailingBytes(type, count)) }
    /// A body whose fields are all there but break a rule of its section (order, flags, zero values).
    public static func invalidBody(_ type: SyncMessageType, _ reason: String) -> Self { Self(.invalidBody(type, reason)) }
    /// An OPERATIONS body whose operation at `index` is not a well-formed §12.1 wire form.
    public static func invalidOperation(index: Int, _ reason: String) -> Self { Self(.invalidOperation(index: index, reason)) }

    /// A message to send with a list of `count` items, over the u16 count a body holds
    /// (`SyncMessage.maxListCount`; `maxNamesCount` for NAMES): the sender must split it.
    public static func listTooLong(_ type: SyncMessageType, _ count: Int) -> Self { Self(.listTooLong(type, count)) }

    /// A COMPRESSED body the connection's zstd stream cannot decode to one whole message
    /// within the limits of §14.11.
    public static func invalidCompression(_ reason: String) -> Self { Self(.invalidCompression(reason)) }

    /// The error's name in the vector files (`Protocol/vectors/sync-messages.json`).
    var vectorName: String {
        switch kind {
        case .empty: "empty"
        case .unknownType: "unknownType"
        case .tooLarge: "tooLarge"
        case .truncated: "truncated"
        case .trailingBytes: "trailingBytes"
        case .invalidBody: "invalidBody"
        case .invalidOperation: "invalidOperation"
        case .invalidCompression: "invalidCompression"
        case .listTooLong: "listTooLong"
        }
    }

    /// The code of the ERROR frame that answers this input from a peer.
    public var code: ErrorCode {
        switch kind {
        case .empty, .tooLarge, .truncated, .trailingBytes, .invalidBody, .invalidOperation, .invalidCompression, .listTooLong:
            .malformedSyncMessage
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
        case .truncated(let type): "malformed \(type) message: the body ends early"
        case .trailingBytes(let type, let count): "malformed \(type) message: \(count) bytes after the last field"
        case .invalidBody(let type, let reason): "malformed \(type) message: \(reason)"
        case .invalidOperation(let index, let reason): "malformed OPERATIONS message: operation \(index): \(reason)"
        case .invalidCompression(let reason): "malformed COMPRESSED message: \(reason)"
        case .listTooLong(let type, let count):
            "a \(type) message cannot hold a list of \(count) items (at most \(SyncMessage.maxListCount(of: type)))"
        }
    }
}

extension ErrorCode {
    /// A DATA payload that is not a sync message (SPEC.md §14.1).
    public static let malformedSyncMessage = ErrorCode(rawValue: 6)
    /// A sync message whose type this version does not know (SPEC.md §14.1).
    public static let unknownSyncMessageType = ErrorCode(rawValue: 7)
}
