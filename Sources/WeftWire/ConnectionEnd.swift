import WeftCrypto

/// Why a connection ended, in words a log line can carry as they are.
public struct ConnectionEnd: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        /// We closed it (shutdown, or the caller asked).
        case localClose
        /// The peer sent CLOSE.
        case peerClosed
        /// The peer sent ERROR: it thinks we misbehaved.
        case peerReportedError
        /// The peer broke the protocol; we sent ERROR (when we could) and closed.
        case protocolViolation
        /// The preambles name different protocol versions.
        case versionMismatch
        /// The handshake did not complete: another mesh key, a forged identity, bad bytes.
        case handshakeFailed
        /// Nothing from the peer within the idle or handshake timeout.
        case timeout
        /// The TCP connection closed without a CLOSE frame.
        case connectionLost
    }

    public let kind: Kind
    public let detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { detail }
}
