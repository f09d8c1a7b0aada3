import Testing
import WeftCrypto
@testable import WeftModel

@Suite("a log of more heads than an operation may name")
struct ManyHeadsTests {
    /// 200 participants and the creator post at once, each seeing only the creation: 201
    /// heads, the creator's the oldest. The creator writes next: its operation names 64 causes
    /// (its own previous operation, which its chain needs, and the 63 newest), encodes, and
    /// is accepted.
    @Test("a local operation names at most 64 heads, keeps its chain, and is accepted")
    func causesAreCapped() throws {
        let wall: UInt64 = 1_700_000_000_000
        var creator = Author(identity: .generate())
        var posters = (0..<200).map { _ in Author(identity: .generate()) }
        var replica = Replica(localUser: creator.user)
        let creation = creator.createConversation(
            with: Set(posters.map(\.user)), distinct: false, in: replica, wallMilliseconds: wall)
        let conversation = creation.operation.conversation
        _ = replica.apply(verified: [creation])
        let own = creator.write(.postMessage(parts: [MessagePart(mimeType: "text/plain", data: [1])], options: .init()), in: conversation, replica: replica, wallMilliseconds: wall + 1)
        var concurrent: [SignedOperation] = []
        for index in posters.indices {
            concurrent.append(
                posters[index].write(
                    .postMessage(parts: [MessagePart(mimeType: "text/plain", data: [1])], options: .init()), in: conversation, replica: replica, wallMilliseconds: wall + 2 + UInt64(index)))
        }
        let report = replica.apply(verified: [own] + concurrent)
        #expect(report.accepted.count == 201)
        #expect(replica.heads(of: conversation).count == 201, "every poster saw only the creation")

        let next = creator.write(.postMessage(parts: [MessagePart(mimeType: "text/plain", data: [1])], options: .init()), in: conversation, replica: replica, wallMilliseconds: wall + 500)
        #expect(next.operation.causes.count == Operation.maxWrittenCauses)
        #expect(next.operation.sequence == 3)
        #expect(next.operation.causes.contains(own.id), "the creator's previous operation, oldest of the heads")
        let decoded = try SignedOperation(wireBytes: next.wireBytes)
        #expect(decoded.id == next.id)
        // The newest heads are named: the last 63 posters' (one slot keeps the chain).
        let newest = Set(concurrent.suffix(Operation.maxWrittenCauses - 1).map(\.id))
        #expect(newest.isSubset(of: Set(next.operation.causes)))
        #expect(replica.apply(verified: [next]).accepted == [next.id], "its causes' past holds the creator's previous operation")
    }
}
