import WeftCrypto

/// An operation with its identifier and its author's signature (SPEC.md §12.1).
///
/// Wire form: `u32 length | canonical encoding | Ed25519 signature (64)`. The identifier is
/// never sent: it is the BLAKE2b-256 of the encoding, so a receiver always recomputes it. The
/// signature covers `"weft operation v1" || identifier`.
public struct SignedOperation: Hashable, Sendable {
    static let signatureDomain = Array("weft operation v1".utf8)
    public static let signatureByteCount = 64

    public let operation: Operation
    public let id: OperationID
    public let signature: [UInt8]
    /// The canonical encoding, kept so it is hashed and stored without re-encoding.
    public let encoding: [UInt8]

    /// Signs `operation`, which must be authored by `identity`.
    public init(signing operation: Operation, with identity: NodeIdentity) {
        precondition(operation.author == identity.publicKey, "an operation is signed by its author")
        // Through the initializer again: fields set after it get their lists sorted too.
        let operation = Operation(
            author: operation.author, conversation: operation.conversation, sequence: operation.sequence,
            timestamp: operation.timestamp, causes: operation.causes, body: operation.body)
        self.operation = operation
        self.encoding = operation.encoded()
        self.id = OperationID(hashing: encoding)
        self.signature = identity.sign(Self.signatureDomain + id.bytes)
    }

    /// Parses the wire form. Checks structure only: call `hasValidSignature` before applying.
    /// `claimedID`, when the sender named the operation, must match the recomputed identifier.
    public init(wireBytes: [UInt8], claimedID: OperationID? = nil) throws(OperationError) {
        var reader = BinaryReader(wireBytes)
        let encoding = try reader.blob(limit: Operation.maxByteCount)
        let signature = try reader.raw(Self.signatureByteCount)
        try reader.expectEnd()
        let operation = try Operation(decoding: encoding)
        let id = OperationID(hashing: encoding)
        if let claimedID, claimedID != id {
            throw OperationError(.wrongHash, "operation \(claimedID) does not hash to its identifier (it hashes to \(id))")
        }
        self.operation = operation
        self.encoding = encoding
        self.id = id
        self.signature = signature
    }

    public var wireBytes: [UInt8] {
        var w = BinaryWriter(capacity: encoding.count + 68)
        w.blob(encoding)
        w.raw(signature)
        return w.bytes
    }

    /// Whether the author's key verifies the signature. The expensive part of accepting an
    /// operation, and independent per operation, so batches check it in parallel.
    public var hasValidSignature: Bool {
        operation.author.isValidSignature(signature, for: Self.signatureDomain + id.bytes)
    }
}
