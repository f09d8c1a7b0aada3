/// RFC 4648 base32, lowercase, without padding: the text form of keys a person may copy by hand.
enum Base32 {
    private static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)
    private static let reverse: [UInt8: UInt8] = {
        var table: [UInt8: UInt8] = [:]
        for (i, c) in alphabet.enumerated() {
            table[c] = UInt8(i)
            if c >= UInt8(ascii: "a") { table[c - 32] = UInt8(i) }  // accept upper case too
        }
        return table
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 8 + 4) / 5)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Why a text is not canonical base32.
    enum DecodingFailure: Error, Equatable {
        /// A character outside the alphabet (padding and whitespace included).
        case invalidCharacter
        /// The last character leaves 5 or more unused bits: no byte count encodes to that length.
        case impossibleLength
        /// The unused bits of the last character are not zero: another text encodes these bytes.
        case nonZeroTrailingBits
    }

    /// Decodes canonical base32; any other text throws the reason.
    static func decode(_ text: Substring) throws(DecodingFailure) -> [UInt8] {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for c in text.utf8 {
            guard let value = reverse[c] else { throw .invalidCharacter }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                out.append(UInt8((buffer >> UInt32(bits - 8)) & 0xff))
                bits -= 8
            }
        }
        guard bits < 5 else { throw .impossibleLength }
        guard buffer & ((1 << UInt32(bits)) - 1) == 0 else { throw .nonZeroTrailingBits }
        return out
    }
}
