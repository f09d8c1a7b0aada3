/// The 32-byte secret shared by every node of one mesh: Noise's PSK in the handshake, so only
/// holders can complete it. Stored as one line of text, `weftmesh1` + base32 with a checksum.
public struct MeshKey: Sendable, Equatable {
    public static func == (lhs: MeshKey, rhs: MeshKey) -> Bool { lhs.secret == rhs.secret }

    public static let byteCount = 32
    static let text = KeyText(prefix: "weftmesh1", domain: "weft mesh key v1")

    public let secret: SecureBytes

    public init(secret: SecureBytes) {
        precondition(secret.count == Self.byteCount, "mesh keys are 32 bytes")
        self.secret = secret
    }

    public static func generate() -> MeshKey { MeshKey(secret: .random(count: byteCount)) }

    /// The mesh key file's contents: the text form and a newline.
    public func fileContents() -> String { Self.text.encode(secret) + "\n" }

    /// Parses a mesh key file; anything else throws `damagedFile` with the reason.
    public init(fileContents: String) throws(WeftCryptoError) {
        var bytes = try Self.text.decode(fileContents, what: "mesh key", failure: WeftCryptoError.damagedFile)
        defer { bytes.withUnsafeMutableBytes(secureZero) }
        self.init(secret: SecureBytes(copying: bytes))
    }
}
