/// Limits of the control protocol (SPEC.md §15). Changing one is a change of the protocol.
public enum ControlConstants {
    /// The socket's file name in the node's home.
    public static let socketFileName = "control.sock"
    /// Bytes before the body: type (1) and request id (4), counted in the length.
    public static let headerByteCount = 5
    /// The largest frame after its length field: type, request id and body (1 MiB).
    public static let maxFrameByteCount = 1 << 20
    /// The length field's own size.
    public static let lengthByteCount = 4
    /// The longest error text, in UTF-8 bytes.
    public static let maxErrorTextByteCount = 1024
    /// The longest display name or address text.
    public static let maxShortTextByteCount = 255
    /// A file path in SEND FILES: Linux's PATH_MAX.
    public static let maxPathByteCount = 4096
    /// DOWNLOAD's part number for "the first rich-content part, else the first part".
    public static let defaultPart: UInt16 = .max
    /// Part data a MESSAGES page carries inline: a part of at most this many bytes comes with
    /// its data, a larger one with its size only (rich content moves on its own).
    public static let maxInlinePartByteCount = 2048
    /// Requests a node serves at once on one connection; it reads no further until one ends.
    public static let maxRequestsInFlight = 16
    /// Messages in one SEND BATCH, at most.
    public static let maxBatchCount = 256
}
