import WeftModel

/// A MIME type whose content parts a node fetches automatically, whatever their size
/// (`ContentConfiguration.automaticDownloadTypes`): one type (`image/png`), every subtype of a
/// type (`image/*`), or every type (`*/*`).
///
/// A part's type matches on its type and subtype alone (the bytes before any `;`, blanks
/// trimmed), in ASCII lowercase: MIME types are case-insensitive (RFC 2045 §5.1), so
/// `Image/PNG; name=a.png` is `image/png`.
public struct MediaTypePattern: Sendable, Hashable, CustomStringConvertible {
    /// The type, lowercase; `*` for every type.
    public let type: String
    /// The subtype, lowercase; `*` for every subtype.
    public let subtype: String

    /// The pattern `text` spells: `type/subtype`, `type/*` or `*/*`, without parameters; nil
    /// for anything else (`*/png`, `image/`, `image/png; q=1`).
    public init?(_ text: String) {
        let essence = Self.essence(of: text)
        guard !text.contains(";"), MessagePart.isValidMIMEType(essence) else { return nil }
        let halves = essence.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let (type, subtype) = (String(halves[0]), String(halves[1]))
        // A star stands for a whole type or subtype, and every subtype of every type only.
        guard !type.contains("*") || (type == "*" && subtype == "*"), !subtype.contains("*") || subtype == "*" else { return nil }
        self.type = type
        self.subtype = subtype
    }

    /// Whether a part of MIME type `mimeType` is one this pattern names.
    public func matches(_ mimeType: String) -> Bool {
        let essence = Self.essence(of: mimeType)
        guard let slash = essence.firstIndex(of: "/") else { return false }
        guard type == "*" || essence[..<slash] == type else { return false }
        return subtype == "*" || essence[essence.index(after: slash)...] == subtype
    }

    public var description: String { "\(type)/\(subtype)" }

    /// `type/subtype` in ASCII lowercase, without parameters or blanks around it.
    static func essence(of mimeType: String) -> String {
        let beforeParameters = mimeType.utf8.prefix { $0 != UInt8(ascii: ";") }
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let trimmed = beforeParameters.drop(while: isBlank).reversed().drop(while: isBlank).reversed()
        let lowered = trimmed.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 + 32 : $0 }
        return String(decoding: lowered, as: UTF8.self)
    }
}
