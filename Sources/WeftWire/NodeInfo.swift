import NIOCore
import WeftBytes
import WeftCrypto

/// What a node tells its peer in its handshake payload (SPEC.md "Handshake payload"):
/// protocol version (u16) | features (u64) | Ed25519 public key (32) | display name (u8 length + UTF-8)
/// | optional listen port (u16). Bytes after those are ignored, so later versions can append fields.
public struct NodeInfo: Hashable, Sendable {
    public var protocolVersion: UInt16
    /// Feature bits (`NodeFeatures`, SPEC.md §3.3): bit 0 says the node understands NAMES,
    /// bit 1 the content-transfer messages (§17.8).
    public var features: UInt64
    /// The node's identity; its converted X25519 key must equal the Noise static key.
    public var identity: PublicIdentity
    public var displayName: String
    /// The TCP port the node accepts connections on, if it listens: a peer that knew the node
    /// at another address (it restarted on a new port) dials this one from now on.
    public var listenPort: UInt16?

    public init(
        identity: PublicIdentity, displayName: String,
        protocolVersion: UInt16 = WireConstants.protocolVersion, features: UInt64 = 0, listenPort: UInt16? = nil
    ) {
        self.listenPort = listenPort
        self.protocolVersion = protocolVersion
        self.features = features
        self.identity = identity
        self.displayName = displayName.truncatedToUTF8(WireConstants.maxDisplayNameByteCount)
    }

    @discardableResult
    public func write(to buffer: inout ByteBuffer) -> Int {
        // Cut again here: `displayName` is a var, and may have been set past the limit.
        buffer.writeInteger(protocolVersion) + buffer.writeInteger(features) + buffer.writeBytes(identity.bytes)
            + buffer.writeLengthPrefixedText(displayName.truncatedToUTF8(WireConstants.maxDisplayNameByteCount), UInt8.self)
            + (listenPort.map { buffer.writeInteger($0) } ?? 0)
    }

    public var bytes: [UInt8] {
        var buffer = ByteBuffer()
        write(to: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// Parses a whole handshake payload; a short or malformed one throws. The key is checked
    /// by the handshake (`ConnectionStateMachine` converts it), not here.
    public init(bytes: [UInt8]) throws(WeftWireError) {
        var buffer = ByteBuffer(bytes: bytes)
        guard let version = buffer.readInteger(as: UInt16.self),
            let features = buffer.readInteger(as: UInt64.self),
            let key = buffer.readBytes(length: PublicIdentity.byteCount)
        else { throw .malformed("the handshake payload is too short for node info") }
        let name: String?
        do {
            name = try buffer.readLengthPrefixedText(UInt8.self, limit: WireConstants.maxDisplayNameByteCount)
        } catch {
            throw .malformed("the handshake payload's display name: \(error)")
        }
        guard let name else { throw .malformed("the handshake payload's display name is truncated") }
        // The handshake converts this key to X25519 to check it against the Noise static key;
        // that conversion rejects an invalid point, so it is not checked twice.
        self.identity = PublicIdentity(unvalidatedBytes: key)
        self.protocolVersion = version
        self.features = features
        self.displayName = name
        // Fewer than two bytes after the name: a node that does not say (or an older one).
        let port = buffer.readInteger(as: UInt16.self) ?? 0
        self.listenPort = port == 0 ? nil : port
    }
}
