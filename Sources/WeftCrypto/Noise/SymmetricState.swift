/// Noise's SymmetricState (§5.2): the chaining key, the handshake hash and a CipherState.
struct SymmetricState: Sendable {
    private(set) var chainingKey: SecureBytes
    private(set) var handshakeHash: [UInt8]
    private(set) var cipher = CipherState()
    /// Whether each encrypted field's key, nonce and associated data are kept in
    /// `fieldSecrets`, for a key log.
    var recordsSecrets = false
    private(set) var fieldSecrets: [NoiseSessionSecrets.Field] = []

    init(protocolName: String) {
        let name = Array(protocolName.utf8)
        if name.count <= BLAKE2b.outputByteCount {
            handshakeHash = name + [UInt8](repeating: 0, count: BLAKE2b.outputByteCount - name.count)
        } else {
            handshakeHash = BLAKE2b.hash(name)
        }
        chainingKey = SecureBytes(copying: handshakeHash)
    }

    mutating func mixHash(_ data: [UInt8]) {
        handshakeHash = BLAKE2b.hash(handshakeHash, data)
    }

    mutating func mixKey(_ inputKeyMaterial: SecureBytes) {
        let out = BLAKE2b.hkdf(chainingKey: chainingKey, inputKeyMaterial: inputKeyMaterial, outputs: 2)
        chainingKey = out[0]
        cipher = CipherState(key: out[1].prefix(CipherState.keyByteCount))
    }

    mutating func mixKey(publicBytes: [UInt8]) {
        mixKey(SecureBytes(copying: publicBytes))
    }

    mutating func mixKeyAndHash(_ inputKeyMaterial: SecureBytes) {
        let out = BLAKE2b.hkdf(chainingKey: chainingKey, inputKeyMaterial: inputKeyMaterial, outputs: 3)
        chainingKey = out[0]
        mixHash(out[1].withUnsafeBytes { [UInt8]($0) })
        cipher = CipherState(key: out[2].prefix(CipherState.keyByteCount))
    }

    var hasKey: Bool { cipher.hasKey }

    mutating func encryptAndHash(_ plaintext: [UInt8]) throws(WeftCryptoError) -> [UInt8] {
        recordField()
        let ciphertext = try cipher.encrypt(associatedData: handshakeHash, plaintext: plaintext)
        mixHash(ciphertext)
        return ciphertext
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(WeftCryptoError) -> [UInt8] {
        recordField()
        let plaintext = try cipher.decrypt(associatedData: handshakeHash, ciphertext: ciphertext)
        mixHash(ciphertext)
        return plaintext
    }

    /// Keeps what opening the field about to be sealed or opened takes, if asked to.
    private mutating func recordField() {
        guard recordsSecrets, let key = cipher.keyBytes() else { return }
        fieldSecrets.append(NoiseSessionSecrets.Field(key: key, nonce: cipher.nonce, associatedData: handshakeHash))
    }

    /// The two transport CipherStates: the first for initiator-to-responder.
    func split() -> (CipherState, CipherState) {
        let (initiatorToResponder, responderToInitiator) = splitKeys()
        return (CipherState(key: initiatorToResponder), CipherState(key: responderToInitiator))
    }

    /// The two transport keys `split()` makes its CipherStates with.
    func splitKeys() -> (SecureBytes, SecureBytes) {
        let out = BLAKE2b.hkdf(chainingKey: chainingKey, inputKeyMaterial: [UInt8](), outputs: 2)
        return (out[0].prefix(CipherState.keyByteCount), out[1].prefix(CipherState.keyByteCount))
    }
}
