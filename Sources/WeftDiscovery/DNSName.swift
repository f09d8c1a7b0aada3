/// A domain name: its labels, without the root's empty one (`_weft._tcp.local` is
/// `["_weft", "_tcp", "local"]`). Labels are bytes (DNS-SD instance names are UTF-8 with any
/// character, dots included, RFC 6763 §4.3); names compare without regard to ASCII case, as
/// DNS does (RFC 1035 §2.3.3).
public struct DNSName: Hashable, Sendable, CustomStringConvertible {
    /// The most bytes in one label and in a whole name on the wire (RFC 1035 §2.3.4).
    public static let maxLabelByteCount = 63
    public static let maxByteCount = 255

    public let labels: [[UInt8]]

    /// - Throws: `badName` for an empty label, a label over 63 bytes or a name over 255.
    public init(labels: [[UInt8]]) throws(DNSMessageError) {
        for label in labels {
            guard !label.isEmpty, label.count <= Self.maxLabelByteCount else {
                throw DNSMessageError(.badName, "a label of \(label.count) bytes (1 to \(Self.maxLabelByteCount))")
            }
        }
        let wire = labels.reduce(1) { $0 + 1 + $1.count }
        guard wire <= Self.maxByteCount else { throw DNSMessageError(.badName, "a name of \(wire) bytes (at most \(Self.maxByteCount))") }
        self.labels = labels
    }

    /// A name from dotted text (`"_weft._tcp.local"`); labels with dots of their own are built
    /// with `init(labels:)`.
    public init(_ text: String) throws(DNSMessageError) {
        try self.init(labels: text.split(separator: ".", omittingEmptySubsequences: true).map { Array($0.utf8) })
    }

    /// The same labels before these: `DNSName("local").prepending("alice")`.
    public func prepending(_ label: [UInt8]) throws(DNSMessageError) -> DNSName {
        try DNSName(labels: [label] + labels)
    }

    /// Bytes on the wire without compression.
    public var byteCount: Int { labels.reduce(1) { $0 + 1 + $1.count } }

    /// The labels folded to lower case (ASCII only), for comparing and compressing.
    var folded: [[UInt8]] { labels.map { $0.map(Self.lowercased) } }

    static func lowercased(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5a ? byte | 0x20 : byte }

    public static func == (a: DNSName, b: DNSName) -> Bool { a.folded == b.folded }
    public func hash(into hasher: inout Hasher) { hasher.combine(folded) }

    /// Dotted, a dot or backslash inside a label escaped with a backslash.
    public var description: String {
        labels.map { label in
            var text = ""
            for scalar in String(decoding: label, as: UTF8.self).unicodeScalars {
                if scalar == "." || scalar == "\\" { text.unicodeScalars.append("\\") }
                text.unicodeScalars.append(scalar)
            }
            return text
        }.joined(separator: ".")
    }
}
