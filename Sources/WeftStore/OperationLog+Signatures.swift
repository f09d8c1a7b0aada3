import WeftModel

// Checking received operations' signatures, the expensive part of accepting an operation, outside
// the writer: a node checks the next batch while the store writes the one before it.
extension OperationLog {
    /// Checks the signatures of received operations, in parallel over the cores, skipping those
    /// the replica accepted already (`Store.checkSignatures(_:)`). The calling task waits
    /// suspended, holding no thread.
    func checkSignatures(_ operations: [SignedOperation]) async throws -> Store.CheckedBatch {
        if needsReplica { try await loadReplica() }
        return Store.CheckedBatch(
            operations: operations, valid: await SignatureCheckers.shared.check(operations, skipping: knownToReplica(operations)))
    }

    /// `checkSignatures(_:)` blocking the calling thread: never from async code.
    func checkSignatures(_ operations: [SignedOperation]) throws -> Store.CheckedBatch {
        if needsReplica { try loadReplicaBlocking() }
        return Store.CheckedBatch(
            operations: operations, valid: SignatureCheckers.shared.checkBlocking(operations, skipping: knownToReplica(operations)))
    }

    /// Per operation, whether the replica accepted it already; nil without a replica in the slot.
    private func knownToReplica(_ operations: [SignedOperation]) -> [Bool]? {
        slot.withLock { slot in
            slot.replica.map { replica in operations.map { replica.isKnown($0.id, in: $0.operation.conversation) } }
        }
    }
}
