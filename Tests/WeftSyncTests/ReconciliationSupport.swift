import Foundation
import NIOCore
import WeftCrypto
import WeftModel
import WeftSync

/// The seeded generator (WeftCrypto.SplitMix64), so every random set in these tests is the same each run.
typealias ReconciliationRandom = SplitMix64

extension SplitMix64 {
    mutating func bytes(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 7)
        while bytes.count < count { withUnsafeBytes(of: next()) { bytes.append(contentsOf: $0) } }
        bytes.removeLast(bytes.count - count)
        return bytes
    }

    mutating func conversation() -> ConversationID { ConversationID(bytes: bytes(16))! }

    mutating func digest() -> SetDigest { SetDigest(bytes: bytes(32))! }
}

/// What one whole reconciliation between two sets did.
struct ReconciliationRun {
    /// What each side learned, the union of its rounds.
    var initiatorDiffering: Set<ConversationID> = []
    var responderDiffering: Set<ConversationID> = []
    /// HAVE body bytes each way, plus one type byte per message (the DATA payloads).
    var initiatorBytes = 0
    var responderBytes = 0
    var messages = 0
    /// Ranges in all the messages (each has a head byte, a bound and its payload).
    var ranges = 0

    var totalBytes: Int { initiatorBytes + responderBytes }
}

/// Runs a reconciliation from `initiator` to `responder` to its end, every message through its
/// encoding and back, as a connection would carry it. Stops after `maxMessages` (a test then
/// fails on the result: the protocol must end well before).
func reconcile(_ initiator: ReconciliationSet, _ responder: ReconciliationSet, maxMessages: Int = 200) throws -> ReconciliationRun {
    let sides = [Reconciler(set: initiator), Reconciler(set: responder)]
    var run = ReconciliationRun()
    var message: HaveMessage? = sides[0].initiate()
    var sender = 0
    while let sent = message, run.messages < maxMessages {
        let bytes = sent.bodyBytes
        if sender == 0 { run.initiatorBytes += 1 + bytes.count } else { run.responderBytes += 1 + bytes.count }
        run.messages += 1
        run.ranges += sent.ranges.count
        let received = try HaveMessage(body: bytes)
        let receiver = 1 - sender
        let (reply, differing) = try sides[receiver].respond(to: received)
        if receiver == 0 { run.initiatorDiffering.formUnion(differing) } else { run.responderDiffering.formUnion(differing) }
        message = reply
        sender = receiver
    }
    return run
}

/// Two sets drawn from one seed: `shared` conversations on both sides (of which `changed` with
/// another digest on one side), plus `onlyInitiator` and `onlyResponder`; and the symmetric
/// difference they should find.
func randomPair(
    seed: UInt64, shared: Int, changed: Int, onlyInitiator: Int, onlyResponder: Int
) -> (initiator: ReconciliationSet, responder: ReconciliationSet, differing: Set<ConversationID>) {
    var random = ReconciliationRandom(seed: seed)
    var initiator: [(ConversationID, SetDigest)] = []
    var responder: [(ConversationID, SetDigest)] = []
    var differing: Set<ConversationID> = []
    for index in 0..<shared {
        let item = (random.conversation(), random.digest())
        initiator.append(item)
        if index < changed {
            responder.append((item.0, random.digest()))
            differing.insert(item.0)
        } else {
            responder.append(item)
        }
    }
    for _ in 0..<onlyInitiator {
        let item = (random.conversation(), random.digest())
        initiator.append(item)
        differing.insert(item.0)
    }
    for _ in 0..<onlyResponder {
        let item = (random.conversation(), random.digest())
        responder.append(item)
        differing.insert(item.0)
    }
    initiator.shuffle(using: &random)
    responder.shuffle(using: &random)
    return (ReconciliationSet(initiator), ReconciliationSet(responder), differing)
}

/// Runs CPU-bound work on a thread of its own instead of the cooperative pool, and waits for it
/// (as Tests/WeftModelTests/OffThePool.swift): the pool has one thread per core, and a test
/// that computes for seconds would stall the async tests beside it.
func reconciliationOffThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}
