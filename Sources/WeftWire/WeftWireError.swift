/// Bad input from a peer, as WeftWire reports it. A struct over a private enum, so new cases do
/// not break users. Every error carries the code sent in the ERROR frame that closes the channel.
public struct WeftWireError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case malformed(String)
        case frameTooLarge(Int)
        case unknownFrameType(UInt8)
        case decryptionFailed
    }

    private let kind: Kind
    private init(_ kind: Kind) { self.kind = kind }

    /// Bytes that do not parse as the protocol says.
    public static func malformed(_ detail: String) -> Self { Self(.malformed(detail)) }
    /// A record announcing more than `WireConstants.maxFrameByteCount`.
    public static func frameTooLarge(_ length: Int) -> Self { Self(.frameTooLarge(length)) }
    /// A frame type this version does not know.
    public static func unknownFrameType(_ type: UInt8) -> Self { Self(.unknownFrameType(type)) }
    /// A transport record whose tag did not verify.
    public static let decryptionFailed = Self(.decryptionFailed)

    /// The code this error is reported with in an ERROR frame.
    public var code: ErrorCode {
        switch kind {
        case .malformed: .malformedFrame
        case .frameTooLarge: .frameTooLarge
        case .unknownFrameType: .unknownFrameType
        case .decryptionFailed: .decryptionFailed
        }
    }

    public var description: String {
        switch kind {
        case .malformed(let detail): "malformed frame: \(detail)"
        case .frameTooLarge(let length):
            "frame of \(length) bytes exceeds the maximum of \(WireConstants.maxFrameByteCount)"
        case .unknownFrameType(let type): "unknown frame type 0x\(String(type, radix: 16))"
        case .decryptionFailed: "a transport record failed authentication"
        }
    }
}

/// Codes carried by ERROR frames (SPEC.md "ERROR").
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let malformedFrame = ErrorCode(rawValue: 1)
    public static let frameTooLarge = ErrorCode(rawValue: 2)
    public static let unknownFrameType = ErrorCode(rawValue: 3)
    public static let decryptionFailed = ErrorCode(rawValue: 4)
    public static let internalError = ErrorCode(rawValue: 5)

    public var description: String {
        switch self {
        case .malformedFrame: "malformed frame"
        case .frameTooLarge: "frame too large"
        case .unknownFrameType: "unknown frame type"
        case .decryptionFailed: "decryption failed"
        case .internalError: "internal error"
        default: "error code \(rawValue)"
        }
    }
}

/// Codes carried by CLOSE frames (SPEC.md "CLOSE").
public struct CloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The sender is done with this connection.
    public static let normal = CloseCode(rawValue: 0)
    /// The sender's node is shutting down.
    public static let shuttingDown = CloseCode(rawValue: 1)
    /// Nothing arrived from the peer within the idle timeout.
    public static let idleTimeout = CloseCode(rawValue: 2)
    /// The two nodes are connected twice; this connection is the one dropped (§5).
    public static let duplicateConnection = CloseCode(rawValue: 3)
    /// The receiver's operator cut the link to the sender; it refuses the connection until
    /// the link is healed.
    public static let linkCut = CloseCode(rawValue: 4)

    public var description: String {
        switch self {
        case .normal: "normal close"
        case .shuttingDown: "shutting down"
        case .idleTimeout: "idle timeout"
        case .duplicateConnection: "duplicate connection"
        case .linkCut: "link cut"
        default: "close code \(rawValue)"
        }
    }
}
