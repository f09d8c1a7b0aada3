/// Noise's HandshakeState (§5.3) for the `25519_ChaChaPoly_BLAKE2b` suite, as a sans-I/O value:
/// bytes in, bytes out, no sockets and no clocks.
///
/// A failed `readMessage` leaves the handshake unusable: Noise offers no recovery from a bad
/// message, so the caller must drop the connection.
public struct NoiseHandshake: Sendable {
    public enum Role: Sendable, Equatable { case initiator, responder }

    /// The only suite Weft implements.
    public static let suite = "25519_ChaChaPoly_BLAKE2b"
    /// Noise's limit on one handshake or transport message (§3).
    public static let maxMessageByteCount = 65535

    public let role: Role
    public let pattern: HandshakePattern
    private var symmetric: SymmetricState
    private let localStatic: X25519KeyPair?
    private var localEphemeral: X25519KeyPair?
    public private(set) var remoteStaticKey: [UInt8]?
    public private(set) var remoteEphemeralKey: [UInt8]?
    private var preSharedKeys: [SecureBytes]
    /// Where ephemeral keys come from (a seeded source makes the handshake reproducible).
    private let random: any RandomSource
    private var messageIndex = 0
    private var failed = false

    /// - Parameters:
    ///   - protocolName: for example `Noise_XXpsk3_25519_ChaChaPoly_BLAKE2b`.
    ///   - random: the source of the ephemeral key; libsodium's CSPRNG unless a simulation or
    ///     test needs the handshake to be reproducible.
    ///   - fixedEphemeral: only for test vectors, which give the ephemeral key itself.
    public init(
        protocolName: String, role: Role, prologue: [UInt8],
        localStatic: X25519KeyPair? = nil, remoteStaticKey: [UInt8]? = nil,
        preSharedKeys: [SecureBytes] = [], random: any RandomSource = SystemRandomSource(),
        fixedEphemeral: X25519KeyPair? = nil, recordsSecrets: Bool = false
    ) throws(WeftCryptoError) {
        let parts = protocolName.split(separator: "_", maxSplits: 2)
        guard parts.count == 3, parts[0] == "Noise", parts[2] == Self.suite,
            let pattern = HandshakePattern(name: String(parts[1]))
        else { throw .unsupportedProtocolName(protocolName) }

        self.role = role
        self.pattern = pattern
        self.localStatic = localStatic
        self.localEphemeral = fixedEphemeral
        self.remoteStaticKey = remoteStaticKey
        self.preSharedKeys = preSharedKeys
        self.random = random
        self.symmetric = SymmetricState(protocolName: protocolName)
        symmetric.recordsSecrets = recordsSecrets
        symmetric.mixHash(prologue)

        // Pre-messages: the initiator's keys first, then the responder's (§7.1). Only static
        // keys appear in the fundamental patterns.
        for (side, tokens) in [(Role.initiator, pattern.initiatorPreMessage), (.responder, pattern.responderPreMessage)] {
            for token in tokens {
                precondition(token == .s, "pre-messages of fundamental patterns hold only static keys")
                let key = side == role ? localStatic?.publicKey : remoteStaticKey
                guard let key else { throw .missingKey(side == role ? "local static" : "remote static") }
                symmetric.mixHash(key)
            }
        }
        let pskCount = pattern.messages.joined().filter { $0 == .psk }.count
        guard preSharedKeys.count >= pskCount else { throw .missingKey("pre-shared") }
    }

    /// True when the next handshake message is ours to write.
    public var isOurTurn: Bool {
        !isComplete && (messageIndex % 2 == 0) == (role == .initiator)
    }

    public var isComplete: Bool { messageIndex >= pattern.messages.count }

    /// The handshake hash `h`: after completion, a unique name for this session (channel binding).
    public var handshakeHash: [UInt8] { symmetric.handshakeHash }

    // MARK: - Writing

    public mutating func writeMessage(payload: [UInt8]) throws(WeftCryptoError) -> [UInt8] {
        guard !failed else { throw .handshakeComplete }
        guard !isComplete else { throw .handshakeComplete }
        guard isOurTurn else { throw .handshakeOutOfTurn }
        var message: [UInt8] = []
        do throws(WeftCryptoError) {
            for token in pattern.messages[messageIndex] {
                switch token {
                case .e:
                    let ephemeral = localEphemeral ?? X25519KeyPair.generate(using: random)
                    localEphemeral = ephemeral
                    message += ephemeral.publicKey
                    symmetric.mixHash(ephemeral.publicKey)
                    if pattern.usesPreSharedKey { symmetric.mixKey(publicBytes: ephemeral.publicKey) }
                case .s:
                    guard let localStatic else { throw WeftCryptoError.missingKey("local static") }
                    message += try symmetric.encryptAndHash(localStatic.publicKey)
                case .ee, .es, .se, .ss:
                    try mixDiffieHellman(token)
                case .psk:
                    symmetric.mixKeyAndHash(preSharedKeys.removeFirst())
                }
            }
            message += try symmetric.encryptAndHash(payload)
        } catch {
            failed = true
            throw error
        }
        guard message.count <= Self.maxMessageByteCount else {
            failed = true
            throw .handshakeMessageTooLong
        }
        messageIndex += 1
        return message
    }

    // MARK: - Reading

    /// Processes the peer's next handshake message and returns its decrypted payload.
    public mutating func readMessage(_ message: [UInt8]) throws(WeftCryptoError) -> [UInt8] {
        guard !failed else { throw .handshakeComplete }
        guard !isComplete else { throw .handshakeComplete }
        guard !isOurTurn else { throw .handshakeOutOfTurn }
        guard message.count <= Self.maxMessageByteCount else { throw .handshakeMessageTooLong }
        var rest = message[...]
        do throws(WeftCryptoError) {
            for token in pattern.messages[messageIndex] {
                switch token {
                case .e:
                    guard rest.count >= X25519KeyPair.keyByteCount else { throw WeftCryptoError.handshakeMessageTooShort }
                    let key = Array(rest.prefix(X25519KeyPair.keyByteCount))
                    rest = rest.dropFirst(X25519KeyPair.keyByteCount)
                    remoteEphemeralKey = key
                    symmetric.mixHash(key)
                    if pattern.usesPreSharedKey { symmetric.mixKey(publicBytes: key) }
                case .s:
                    let length = X25519KeyPair.keyByteCount + (symmetric.hasKey ? CipherState.tagByteCount : 0)
                    guard rest.count >= length else { throw WeftCryptoError.handshakeMessageTooShort }
                    remoteStaticKey = try symmetric.decryptAndHash(Array(rest.prefix(length)))
                    rest = rest.dropFirst(length)
                case .ee, .es, .se, .ss:
                    try mixDiffieHellman(token)
                case .psk:
                    symmetric.mixKeyAndHash(preSharedKeys.removeFirst())
                }
            }
            if symmetric.hasKey && rest.count < CipherState.tagByteCount {
                throw WeftCryptoError.handshakeMessageTooShort
            }
            let payload = try symmetric.decryptAndHash(Array(rest))
            messageIndex += 1
            return payload
        } catch {
            failed = true
            throw error
        }
    }

    // MARK: - Completion

    /// The transport ciphers, once the handshake is complete: `send` encrypts what we send.
    public func split() -> (send: CipherState, receive: CipherState) {
        precondition(isComplete, "split() before the handshake completed")
        let (initiatorToResponder, responderToInitiator) = symmetric.split()
        return role == .initiator
            ? (initiatorToResponder, responderToInitiator)
            : (responderToInitiator, initiatorToResponder)
    }

    /// The ephemeral public key this side sent, once it has.
    public var localEphemeralKey: [UInt8]? { localEphemeral?.publicKey }

    /// What a key log keeps of this session (see `NoiseSessionSecrets`): nil unless the
    /// handshake was made with `recordsSecrets` and is complete.
    public func sessionSecrets() -> NoiseSessionSecrets? {
        guard symmetric.recordsSecrets, isComplete else { return nil }
        let (initiatorToResponder, responderToInitiator) = symmetric.splitKeys()
        return NoiseSessionSecrets(
            fields: symmetric.fieldSecrets, initiatorToResponder: initiatorToResponder.withUnsafeBytes { [UInt8]($0) },
            responderToInitiator: responderToInitiator.withUnsafeBytes { [UInt8]($0) })
    }

    // MARK: - DH tokens

    /// `es` means DH(initiator ephemeral, responder static), and so on (Noise §7.1).
    private mutating func mixDiffieHellman(_ token: HandshakePattern.Token) throws(WeftCryptoError) {
        let initiatorKeyIsEphemeral = token == .ee || token == .es
        let responderKeyIsEphemeral = token == .ee || token == .se
        let weAreInitiator = role == .initiator
        let localIsEphemeral = weAreInitiator ? initiatorKeyIsEphemeral : responderKeyIsEphemeral
        let remoteIsEphemeral = weAreInitiator ? responderKeyIsEphemeral : initiatorKeyIsEphemeral

        guard let local = localIsEphemeral ? localEphemeral : localStatic else {
            throw .missingKey(localIsEphemeral ? "local ephemeral" : "local static")
        }
        guard let remote = remoteIsEphemeral ? remoteEphemeralKey : remoteStaticKey else {
            throw .missingKey(remoteIsEphemeral ? "remote ephemeral" : "remote static")
        }
        symmetric.mixKey(try local.sharedSecret(with: remote))
    }
}
