/// Text forms of 32-byte keys: a prefix, then base32 of the key followed by a 4-byte checksum
/// (BLAKE2b-32 of a domain string and the key). A mistyped character fails the checksum instead
/// of naming another key. See SPEC.md, "Text forms of keys".
struct KeyText: Sendable {
    let prefix: String
    let domain: String

    static let checksumByteCount = 4
    static let keyByteCount = 32

    func encode(_ key: some ContiguousBytes) -> String {
        let bytes = key.withUnsafeBytes { [UInt8]($0) }
        return prefix + Base32.encode(bytes + checksum(bytes))
    }

    /// Decodes `text`; `failure` turns the reason into the caller's error.
    func decode(
        _ text: String, what: String, failure: (String) -> WeftCryptoError = WeftCryptoError.invalidIdentifier
    ) throws(WeftCryptoError) -> [UInt8] {
        let trimmed = text.trimmingWhitespace()
        guard trimmed.lowercased().hasPrefix(prefix) else {
            throw failure("a \(what) starts with \"\(prefix)\"")
        }
        let bytes: [UInt8]
        do {
            bytes = try Base32.decode(trimmed.dropFirst(prefix.count))
        } catch {
            switch error {
            case .invalidCharacter: throw failure("the \(what) holds characters outside a-z and 2-7")
            case .impossibleLength: throw failure("the \(what) has the wrong length")
            case .nonZeroTrailingBits:
                throw failure("the \(what) ends in a character whose unused trailing bits are not zero (a mistyped last character?)")
            }
        }
        guard bytes.count == Self.keyByteCount + Self.checksumByteCount else {
            throw failure("the \(what) has the wrong length")
        }
        let key = Array(bytes.prefix(Self.keyByteCount))
        guard constantTimeEquals(Array(bytes.suffix(Self.checksumByteCount)), checksum(key)) else {
            throw failure("the \(what) fails its checksum (a mistyped character?)")
        }
        return key
    }

    private func checksum(_ key: [UInt8]) -> [UInt8] {
        BLAKE2b.hash(Array(domain.utf8), key, outputByteCount: Self.checksumByteCount)
    }
}

extension String {
    func trimmingWhitespace() -> Substring {
        var s = self[...]
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return s
    }
}

/// A user identifier: the text form of an Ed25519 public key, `weft1` + 58 base32 characters.
public enum UserIdentifier {
    static let text = KeyText(prefix: "weft1", domain: "weft user identifier v1")

    public static func encode(_ identity: PublicIdentity) -> String { text.encode(identity.bytes) }

    /// Parses an identifier; a mistyped one throws `invalidIdentifier` with the reason.
    public static func decode(_ string: String) throws(WeftCryptoError) -> PublicIdentity {
        try PublicIdentity(bytes: text.decode(string, what: "user identifier"))
    }
}
