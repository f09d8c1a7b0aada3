/// MIME types whose content is compressed already (SPEC.md §17.5): a sender sends their
/// chunks raw without trying zstd. The list is the sender's choice, not a rule a receiver
/// checks; Weft's is below.
///
/// The type and subtype (the bytes before any `;`, blanks trimmed) are compared in ASCII
/// lowercase, as MIME types are case-insensitive (RFC 2045 §5.1).
public enum CompressedMediaTypes {
    /// Top-level types whose every subtype counts as compressed, but `exceptions`.
    public static let types: Set<String> = ["image", "video", "audio"]

    /// Types of those top-level types that are not compressed: text, or raw samples.
    public static let exceptions: Set<String> = [
        "image/svg+xml", "image/bmp", "image/x-ms-bmp", "image/x-portable-pixmap", "image/tiff",
        "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave", "audio/aiff", "audio/x-aiff",
    ]

    /// Single types that count as compressed: archives, compressed streams, and document
    /// formats that are zip archives.
    public static let subtypes: Set<String> = [
        "application/zip", "application/x-zip-compressed", "application/gzip", "application/x-gzip",
        "application/zstd", "application/x-zstd", "application/x-7z-compressed", "application/x-bzip2",
        "application/x-xz", "application/x-lzip", "application/x-lz4", "application/x-brotli",
        "application/vnd.rar", "application/x-rar-compressed", "application/java-archive",
        "application/vnd.android.package-archive", "application/epub+zip",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.oasis.opendocument.text", "application/vnd.oasis.opendocument.spreadsheet",
        "application/vnd.oasis.opendocument.presentation", "font/woff", "font/woff2",
    ]

    /// Whether content of `mimeType` is sent raw without trying zstd.
    public static func contains(_ mimeType: String) -> Bool {
        let essence = Self.essence(of: mimeType)
        if subtypes.contains(essence) { return true }
        guard let slash = essence.firstIndex(of: "/") else { return false }
        return types.contains(String(essence[..<slash])) && !exceptions.contains(essence)
    }

    /// `type/subtype` in ASCII lowercase, without parameters or blanks around it.
    static func essence(of mimeType: String) -> String {
        let beforeParameters = mimeType.utf8.prefix { $0 != UInt8(ascii: ";") }
        let trimmed = beforeParameters.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            .reversed().drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }.reversed()
        let lowered = trimmed.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 }
        return String(decoding: lowered, as: UTF8.self)
    }
}
