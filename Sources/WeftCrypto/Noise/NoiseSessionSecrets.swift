/// What a key log keeps of one Noise session (SPEC.md §18): enough for a decoder holding the
/// session's bytes to open every encrypted handshake field and both transport directions, and
/// nothing that outlives the session (no static key, no pre-shared key).
///
/// Made only when asked for (`NoiseHandshake(recordsSecrets: true)`): it holds key bytes
/// outside `SecureBytes`, as text for a file.
public struct NoiseSessionSecrets: Sendable, Hashable {
    /// One encrypted handshake field (a payload or a static key), as ChaCha20-Poly1305 opens it.
    public struct Field: Sendable, Hashable {
        public var key: [UInt8]
        public var nonce: UInt64
        /// The handshake hash `h` when the field was sealed.
        public var associatedData: [UInt8]

        public init(key: [UInt8], nonce: UInt64, associatedData: [UInt8]) {
            self.key = key
            self.nonce = nonce
            self.associatedData = associatedData
        }
    }

    /// Every encrypted field of the handshake, in the order the messages carry them.
    public var fields: [Field]
    /// The transport keys `Split()` gives, before any rekey (§8 derives the later ones).
    public var initiatorToResponder: [UInt8]
    public var responderToInitiator: [UInt8]

    public init(fields: [Field], initiatorToResponder: [UInt8], responderToInitiator: [UInt8]) {
        self.fields = fields
        self.initiatorToResponder = initiatorToResponder
        self.responderToInitiator = responderToInitiator
    }
}
