/// Everything WeftCrypto can report. A struct over a private enum, so new cases don't break users.
public struct WeftCryptoError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case invalidPublicKey
        case decryptionFailed
        case nonceExhausted
        case handshakeMessageTooShort
        case handshakeMessageTooLong
        case handshakeOutOfTurn
        case handshakeComplete
        case unsupportedProtocolName(String)
        case missingKey(String)
        case wrongPassphrase
        case keyDerivationFailed
        case damagedFile(String)
        case invalidIdentifier(String)
    }

    private let code: Code
    private init(_ code: Code) { self.code = code }

    /// A public key that is malformed or of small order.
    public static let invalidPublicKey = Self(.invalidPublicKey)
    /// An AEAD tag did not verify: wrong key, or the bytes were altered.
    public static let decryptionFailed = Self(.decryptionFailed)
    /// A cipher's 64-bit nonce would wrap; the session must end.
    public static let nonceExhausted = Self(.nonceExhausted)
    public static let handshakeMessageTooShort = Self(.handshakeMessageTooShort)
    public static let handshakeMessageTooLong = Self(.handshakeMessageTooLong)
    /// A handshake message was written or read when it was the other side's turn.
    public static let handshakeOutOfTurn = Self(.handshakeOutOfTurn)
    public static let handshakeComplete = Self(.handshakeComplete)
    public static func unsupportedProtocolName(_ name: String) -> Self { Self(.unsupportedProtocolName(name)) }
    public static func missingKey(_ which: String) -> Self { Self(.missingKey(which)) }
    /// The sealed identity did not open with the given passphrase.
    public static let wrongPassphrase = Self(.wrongPassphrase)
    /// Argon2id could not run (libsodium failed, in practice for lack of memory).
    public static let keyDerivationFailed = Self(.keyDerivationFailed)
    /// A key file is truncated, altered or not a Weft file at all.
    public static func damagedFile(_ why: String) -> Self { Self(.damagedFile(why)) }
    /// A user identifier or key text that does not parse or fails its checksum.
    public static func invalidIdentifier(_ why: String) -> Self { Self(.invalidIdentifier(why)) }

    public var isDamagedFile: Bool { if case .damagedFile = code { true } else { false } }
    public var isInvalidIdentifier: Bool { if case .invalidIdentifier = code { true } else { false } }

    public var description: String {
        switch code {
        case .invalidPublicKey: "the public key is invalid or of small order"
        case .decryptionFailed: "decryption failed: wrong key or altered bytes"
        case .nonceExhausted: "the cipher's nonce space is exhausted"
        case .handshakeMessageTooShort: "the handshake message is too short"
        case .handshakeMessageTooLong: "the handshake message is longer than 65535 bytes"
        case .handshakeOutOfTurn: "a handshake message arrived out of turn"
        case .handshakeComplete: "the handshake is already complete"
        case .unsupportedProtocolName(let name): "unsupported Noise protocol name \(name)"
        case .missingKey(let which): "the handshake needs the \(which) key, which was not given"
        case .wrongPassphrase: "the passphrase is wrong"
        case .keyDerivationFailed: "Argon2id could not run (not enough memory?)"
        case .damagedFile(let why): "the file is damaged: \(why)"
        case .invalidIdentifier(let why): "invalid identifier: \(why)"
        }
    }
}
