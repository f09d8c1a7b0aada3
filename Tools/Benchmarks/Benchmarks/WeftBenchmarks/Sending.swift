import Benchmark
import Foundation
import Weft
import WeftModel
import WeftStore

// The send path of the end-to-end benchmark without the control socket and replication:
// `WeftClient.send` (membership, signature, the group commit with the outbox entry) from 16
// senders at once into one conversation, store on disk, no peers. msgs/s = 1,000 x throughput;
// CPU per message = CPU total / 1,000.
func registerSendingBenchmarks() {
    let sending = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .cpuTotal], warmupIterations: 1, maxDuration: .seconds(20), maxIterations: 20)
    Benchmark(
        "Client: send 1,000 messages from 16 senders at once (store on disk, no peers)", configuration: sending,
        closure: { (benchmark: Benchmark, fixture: SendFixture) async in
            for _ in benchmark.scaledIterations {
                do {
                    try await fixture.sendThousand()
                } catch {
                    benchmark.error("send failed: \(error)")
                }
            }
        },
        setup: { try await SendFixture() })
}

final class SendFixture: Sendable {
    let client: WeftClient
    let conversation: ConversationID
    static let senders = 16

    init() async throws {
        let directory = ScratchDirectories.make("weft-bench-send")
        let store = try Store(directory: directory, localUser: StoreFixtures.local.publicKey)
        client = try WeftClient(store: store, identity: StoreFixtures.local)
        conversation = try await client.createConversation(with: [StoreFixtures.peers[0].publicKey], options: ConversationOptions(announce: true)).id
    }

    func sendThousand() async throws {
        let (client, conversation) = (self.client, self.conversation)
        try await withThrowingTaskGroup { group in
            for sender in 0..<Self.senders {
                group.addTask {
                    for index in stride(from: sender, to: 1_000, by: Self.senders) {
                        _ = try await client.send([MessagePart(mimeType: "text/plain", data: Array("message \(index)".utf8))], in: conversation)
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
