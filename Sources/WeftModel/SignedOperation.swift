import NIOCore
import WeftBytes
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
        var reader = ByteBuffer(bytes: wireBytes)
        let encodingBytes = try reader.readOperationBlob(limit: Operation.maxByteCount)
        let signature = try reader.readOperationBytes(count: Self.signatureByteCount)
        try reader.expectOperationEnd("the signature")
        let operation = try Operation(decoding: encodingBytes)
        let encoding = encodingBytes.readableBytesArray
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
        var buffer = ByteBufferAllocator().buffer(capacity: 4 + encoding.count + signature.count)
        buffer.writeOperationBlob(encoding)
        buffer.writeBytes(signature)
        return buffer.readableBytesArray
    }

    /// Whether the author's key verifies the signature. The expensive part of accepting an
    /// operation, and independent per operation, so batches check it in parallel.
    public var hasValidSignature: Bool {
        operation.author.isValidSignature(signature, for: Self.signatureDomain + id.bytes)
    }
}
