import Testing
@testable import WeftModel

@Suite struct SetDigestTests {
    func id(_ byte: UInt8, fill: UInt8 = 0) -> OperationID {
        OperationID(bytes: [byte] + [UInt8](repeating: fill, count: 31))!
    }

    @Test func orderDoesNotMatterAndUnionAdds() {
        let ids = (1...50).map { id(UInt8($0), fill: UInt8(255 - $0)) }
        let forward = SetDigest(ids)
        let backward = SetDigest(ids.reversed())
        #expect(forward == backward)
        var halves = SetDigest(ids.prefix(20))
        halves.formUnion(SetDigest(ids.dropFirst(20)))
        #expect(halves == forward)
        #expect(SetDigest(ids.prefix(49)) != forward)
    }

    @Test func carriesAcrossLimbs() {
        // 0xff...ff + 1 wraps to zero modulo 2^256: every limb carries.
        let allOnes = OperationID(bytes: [UInt8](repeating: 0xff, count: 32))!
        var digest = SetDigest([allOnes])
        digest.insert(id(1))
        #expect(digest.isEmpty)
        // 0xff in the low byte of limb 0 plus 1 carries into the second byte.
        let low = SetDigest([id(0xff), id(1)])
        #expect(low.bytes[0] == 0 && low.bytes[1] == 1 && low.bytes[2...].allSatisfy { $0 == 0 })
    }

    @Test func removeUndoesInsert() {
        let ids = (1...10).map { id(UInt8($0 * 20), fill: UInt8($0)) }
        var digest = SetDigest(ids)
        digest.remove(ids[3])
        #expect(digest == SetDigest(ids.enumerated().filter { $0.offset != 3 }.map(\.element)))
    }

    @Test func bytesRoundTrip() {
        let digest = SetDigest((1...7).map { id(UInt8($0), fill: 0x5a) })
        #expect(SetDigest(bytes: digest.bytes) == digest)
        #expect(SetDigest(bytes: [1, 2, 3]) == nil)
    }
}
