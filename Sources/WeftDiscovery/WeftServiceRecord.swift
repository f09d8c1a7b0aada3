import WeftCrypto

/// What a Weft node's TXT record says (SPEC.md §16.1): the protocol version, its user, and the
/// tag of its mesh.
public struct WeftServiceRecord: Hashable, Sendable {
    /// `v`: the version this node speaks (§2's preamble version).
    public static let currentVersion = 1
    static let tagByteCount = 16

    public var version: Int
    public var user: PublicIdentity
    /// `mesh`: `MeshKey.tag`, 16 bytes.
    public var meshTag: [UInt8]

    public init(version: Int = WeftServiceRecord.currentVersion, user: PublicIdentity, meshTag: [UInt8]) {
        self.version = version
        self.user = user
        self.meshTag = meshTag
    }

    /// The TXT record's strings, `key=value` each.
    public var txtStrings: [[UInt8]] {
        [
            Array("v=\(version)".utf8),
            Array("user=\(UserIdentifier.encode(user))".utf8),
            Array("mesh=\(Self.hex(meshTag))".utf8),
        ]
    }

    /// Reads a TXT record's strings: nil unless `v`, `user` and `mesh` are there and well formed
    /// (keys it does not know are ignored; the first of a repeated key counts, RFC 6763 §6.4).
    public init?(txt strings: [[UInt8]]) {
        var values: [String: String] = [:]
        for string in strings {
            guard let equals = string.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let key = String(decoding: string[..<equals], as: UTF8.self).lowercased()
            if values[key] == nil { values[key] = String(decoding: string[(equals + 1)...], as: UTF8.self) }
        }
        guard let versionText = values["v"], let version = Int(versionText), version >= 1,
            let userText = values["user"], let user = try? UserIdentifier.decode(userText),
            let tagText = values["mesh"], let tag = Self.bytes(hex: tagText), tag.count == Self.tagByteCount
        else { return nil }
        self.init(version: version, user: user, meshTag: tag)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes { text += [digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]] }
        return String(decoding: text, as: UTF8.self)
    }

    static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
