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
