import Foundation
import WeftCrypto
import WeftModel

/// `starts` fresh homes, one `weft node` each (no peers), started one after another: the time
/// from spawning to the address file, and the resident memory a second after listening.
struct Footprint {
    var starts = 5

    struct Result {
        var startToListening: [Duration]
        var residentMegabytes: [Double]
    }

    func run(in directory: URL) async throws -> Result {
        var result = Result(startToListening: [], residentMegabytes: [])
        for index in 0..<starts {
            let node = try NodeProcess("idle-\(index)", in: directory)
            defer { node.stop() }
            try node.start()
            result.startToListening.append(node.startToListening)
            _ = try await node.status()  // the control socket serves too
            try await Task.sleep(for: .seconds(1))
            result.residentMegabytes.append(try node.residentMegabytes())
        }
        return result
    }
}

/// The limit every hop runs into: Ed25519 verifications per second on one core
/// (`SignedOperation.hasValidSignature`, which the store runs on every received operation).
enum SignatureLimit {
    static func verificationsPerSecond(for duration: Duration = .seconds(1)) -> Double {
        var author = Author(identity: NodeIdentity.generate())
        let operations = (0..<64).map { index in
            author.createConversation(
                with: [NodeIdentity.generate().publicKey], distinct: false, in: Replica(localUser: nil),
                wallMilliseconds: 1_700_000_000_000 + UInt64(index))
        }
        var verified = 0
        let start = ContinuousClock.now
        while ContinuousClock.now - start < duration {
            for operation in operations where operation.hasValidSignature { verified += 1 }
        }
        return Double(verified) / (ContinuousClock.now - start).seconds
    }
}
