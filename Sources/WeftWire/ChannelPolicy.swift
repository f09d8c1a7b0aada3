import NIOCore

/// Timings of a secure channel (SPEC.md "Keepalive" and "Rekeying"). The defaults are the
/// protocol's; tests shorten them.
public struct ChannelPolicy: Sendable {
    /// A ping goes out when nothing was sent for this long.
    public var pingInterval: TimeAmount
    /// The connection closes when nothing was received for this long.
    public var idleTimeout: TimeAmount
    /// The whole handshake, preambles included, must finish within this.
    public var handshakeTimeout: TimeAmount
    /// The sender rekeys after this many plaintext bytes under one key...
    public var rekeyAfterBytes: UInt64
    /// ...or after this long, whichever comes first.
    public var rekeyAfterTime: TimeAmount

    public init(
        pingInterval: TimeAmount = .seconds(15), idleTimeout: TimeAmount = .seconds(60),
        handshakeTimeout: TimeAmount = .seconds(10), rekeyAfterBytes: UInt64 = 1 << 30,
        rekeyAfterTime: TimeAmount = .minutes(60)
    ) {
        self.pingInterval = pingInterval
        self.idleTimeout = idleTimeout
        self.handshakeTimeout = handshakeTimeout
        self.rekeyAfterBytes = rekeyAfterBytes
        self.rekeyAfterTime = rekeyAfterTime
    }

    public static let `default` = ChannelPolicy()
}
