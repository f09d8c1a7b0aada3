import WeftCrypto

/// Where connections write the secrets that decrypt their traffic (SPEC.md §18), as TLS
/// writes to SSLKEYLOGFILE: for inspection tools (`weft dump`), never on by default. Set on
/// `ConnectionStateMachine.Configuration.keyLog`; each connection records one entry when its
/// handshake splits its cipher states.
public protocol KeyLog: Sendable {
    func record(_ entry: KeyLogEntry)
}

/// One connection's secrets, named by the initiator's ephemeral public key (the first 32
/// bytes of handshake message 1, which both sides and a capture see).
public struct KeyLogEntry: Sendable, Hashable {
    public var initiatorEphemeral: [UInt8]
    public var secrets: NoiseSessionSecrets

    public init(initiatorEphemeral: [UInt8], secrets: NoiseSessionSecrets) {
        self.initiatorEphemeral = initiatorEphemeral
        self.secrets = secrets
    }

    /// The label of a handshake field's line and of a transport line.
    public static let fieldLabel = "WEFT_HANDSHAKE_FIELD"
    public static let transportLabel = "WEFT_TRANSPORT"

    /// The entry as key log lines (§18), without line ends: one per encrypted handshake field,
    /// then the transport keys.
    public var lines: [String] {
        let connection = Self.hex(initiatorEphemeral)
        var lines = secrets.fields.enumerated().map { index, field in
            "\(Self.fieldLabel) \(connection) \(index) \(Self.hex(field.key)) \(field.nonce) \(Self.hex(field.associatedData))"
        }
        lines.append(
            "\(Self.transportLabel) \(connection) \(Self.hex(secrets.initiatorToResponder)) \(Self.hex(secrets.responderToInitiator))")
        return lines
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

extension KeyLogEntry {
    /// Reads a key log's text (§18): the entries whose lines are all there, by connection,
    /// and each line that could not be read, with its number (1-based) and why. Comment lines,
    /// empty lines and unknown labels are skipped, as §18 asks.
    public static func parse(_ text: String) -> (entries: [[UInt8]: KeyLogEntry], problems: [(line: Int, reason: String)]) {
        var fields: [[UInt8]: [Int: NoiseSessionSecrets.Field]] = [:]
        var entries: [[UInt8]: KeyLogEntry] = [:]
        var problems: [(Int, String)] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let words = line.split(separator: " ", omittingEmptySubsequences: false)
            guard let label = words.first, !label.isEmpty, !label.hasPrefix("#") else { continue }
            switch label {
            case Substring(fieldLabel):
                guard words.count == 6, let connection = bytes(words[1], count: 32), let number = Int(words[2]), (0..<5).contains(number),
                    let key = bytes(words[3], count: 32), let nonce = UInt64(words[4]), let data = bytes(words[5], count: 64)
                else {
                    problems.append((index + 1, "a \(fieldLabel) line is: label, connection (64 hex digits), index 0-4, key (64 hex digits), nonce, associated data (128 hex digits)"))
                    continue
                }
                fields[connection, default: [:]][number] = NoiseSessionSecrets.Field(key: key, nonce: nonce, associatedData: data)
            case Substring(transportLabel):
                guard words.count == 4, let connection = bytes(words[1], count: 32), let forward = bytes(words[2], count: 32),
                    let backward = bytes(words[3], count: 32)
                else {
                    problems.append((index + 1, "a \(transportLabel) line is: label, connection, and two keys (64 hex digits each)"))
                    continue
                }
                let known = fields[connection] ?? [:]
                entries[connection] = KeyLogEntry(
                    initiatorEphemeral: connection,
                    secrets: NoiseSessionSecrets(
                        fields: (0..<5).compactMap { known[$0] }, initiatorToResponder: forward, responderToInitiator: backward))
            default:
                continue
            }
        }
        return (entries, problems)
    }

    /// `count` bytes from exactly `2 × count` hex digits (either case).
    static func bytes(_ text: Substring, count: Int) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == count * 2 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
