/// Numbers fixed by the protocol (SPEC.md §1). Changing one is a protocol version change.
public enum WireConstants {
    /// The protocol version this build speaks (SPEC.md "Preamble").
    public static let protocolVersion: UInt16 = 1
    /// The preamble's first four bytes, ASCII "WEFT".
    public static let magic: [UInt8] = Array("WEFT".utf8)
    public static let preambleByteCount = 8
    /// The Noise protocol name of the handshake.
    public static let noiseProtocolName = "Noise_XXpsk3_25519_ChaChaPoly_BLAKE2b"
    /// Largest plaintext frame (type, flags and payload): 1 MiB.
    public static let maxFrameByteCount = 1 << 20
    /// Frame header: type and flags.
    public static let frameHeaderByteCount = 2
    /// Largest DATA payload: a whole frame less its header (1048574 bytes).
    public static let maxDataPayloadByteCount = maxFrameByteCount - frameHeaderByteCount
    /// The AEAD tag on every transport record.
    public static let tagByteCount = 16
    /// A transport record's length field.
    public static let recordLengthByteCount = 4
    /// A handshake record's length field (Noise §3: messages are at most 65535 bytes).
    public static let handshakeLengthByteCount = 2
    /// Longest display name in node info, in UTF-8 bytes.
    public static let maxDisplayNameByteCount = 64
    /// Longest text in a CLOSE or ERROR frame, in UTF-8 bytes.
    public static let maxReasonTextByteCount = 256
}
