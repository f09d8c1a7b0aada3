// weft-store-writer: a test helper for the store's crash test. Opens the store in a directory
// and writes batches of signed operations in a loop until killed (or for --batches N):
// odd batches as received from two peers (`Store.apply(received:)`), even ones as the local
// user's messages with their outbox entries (`Store.commitLocal`). Prints "writing N" before
// each write and "committed N" after it, N being the operations in the log once it commits.
//
//   weft-store-writer <directory> [--batch-size 200] [--batches N] [--part-bytes N]
//
// --part-bytes pads each message with a second part of that many bytes, so a batch's
// transaction writes more pages (and a kill lands inside it more often).
//
//   weft-store-writer content <home> ...
//
// writes chunks of a partial content instead, for the content store's crash test
// (ContentWriter.swift).
import Foundation
import WeftCrypto
import WeftModel
import WeftStore

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("weft-store-writer: \(message)\n".utf8))
    exit(1)
}

if CommandLine.arguments.dropFirst().first == "content" {
    runContentWriter(Array(CommandLine.arguments.dropFirst(2)))
}

var arguments = CommandLine.arguments.dropFirst()
guard let path = arguments.popFirst() else { fail("usage: weft-store-writer <directory> [--batch-size 200] [--batches N] [--part-bytes N]") }
var batchSize = 200
var batchLimit = Int.max
var partBytes = 0
while let flag = arguments.popFirst() {
    guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else { fail("\(flag) takes a positive number") }
    switch flag {
    case "--batch-size": batchSize = value
    case "--batches": batchLimit = value
    case "--part-bytes": partBytes = value
    default: fail("unknown option \(flag)")
    }
}

/// The same three users on every run, so a restarted writer continues their sequences.
func user(_ number: UInt8) -> Author {
    Author(identity: NodeIdentity(seed: SecureBytes(copying: [UInt8](repeating: number, count: NodeIdentity.seedByteCount))))
}
var local = user(1)
var peers = [user(2), user(3)]

/// A line on standard output, written at once (unbuffered): the test reads it while we run.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

func wallMilliseconds() -> UInt64 { UInt64(Date().timeIntervalSince1970 * 1000) }

@MainActor func text(_ s: String) -> OperationBody {
    var parts = [MessagePart(mimeType: "text/plain", data: Array(s.utf8))]
    if partBytes > 0 {
        parts.append(MessagePart(mimeType: "application/octet-stream", data: [UInt8](repeating: UInt8(truncatingIfNeeded: s.hashValue), count: partBytes)))
    }
    return .postMessage(parts: parts, options: MessageOptions(notificationText: s))
}

do {
    let store = try Store(directory: URL(fileURLWithPath: path), localUser: local.user)
    let counts = try store.operationCounts()
    var total = counts.accepted + counts.pending + counts.rejected
    var batchNumber = total / batchSize
    // A scratch copy of the replica, built from the log once: each operation is applied to it
    // as it is written, so the next one follows it (causes, sequence numbers), and it stays equal
    // to the store's (a batch that is not accepted whole ends the writer).
    var scratch = try store.replica
    while batchNumber < batchLimit {
        var operations: [SignedOperation] = []
        var outbox: [OutboxEntry] = []
        let received = batchNumber % 2 == 0
        func add(_ op: SignedOperation) {
            _ = scratch.apply(verified: [op])
            operations.append(op)
        }
        if scratch.conversationIDs.isEmpty {
            // The first batch creates one conversation with each peer and one with both.
            for others in [[peers[0].user], [peers[1].user], [peers[0].user, peers[1].user]] {
                add(peers[0].createConversation(with: Set(others + [local.user]).subtracting([peers[0].user]), in: scratch, wallMilliseconds: wallMilliseconds()))
            }
        }
        let conversations = scratch.conversationIDs
        while operations.count < batchSize {
            let index = operations.count
            let conversation = conversations[(batchNumber + index) % conversations.count]
            let candidates = received ? peers.indices.filter { scratch.isParticipant(peers[$0].user, of: conversation) } : []
            let message = text("batch \(batchNumber) message \(index)")
            if received, let peer = candidates.randomElement() {
                add(peers[peer].write(message, in: conversation, replica: scratch, wallMilliseconds: wallMilliseconds()))
            } else {
                let op = local.write(message, in: conversation, replica: scratch, wallMilliseconds: wallMilliseconds())
                add(op)
                if !received { outbox.append(OutboxEntry(posting: op, createdAt: wallMilliseconds())) }
            }
        }
        say("writing \(total + operations.count)")
        let applied =
            received
            ? try await store.apply(received: operations, wallMilliseconds: wallMilliseconds())
            : try await store.commitLocal(operations, outbox: outbox)
        guard applied.report.accepted.count == operations.count else {
            fail("batch \(batchNumber): \(applied.report.rejected.first.map { "\($0.1)" } ?? "not all accepted")")
        }
        total += operations.count
        batchNumber += 1
        say("committed \(total)")
    }
} catch {
    fail("\(error)")
}
