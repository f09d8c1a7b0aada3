import Foundation
@_spi(Benchmarks) import WeftStore
import WeftCrypto
import WeftNode

/// A `weft node` whose store holds `conversations` conversations of `messagesPerConversation`
/// messages (built with `Store.fillSynthetic`: real signed operations, the node's user in
/// each, the other participant one of three other users); a new node with an empty store
/// joins it. The clock runs from spawning the new node until its STATUS shows as many held
/// operations as the first node's.
struct CatchUp {
    var conversations = 100
    var messagesPerConversation = 1_000

    struct Result {
        var operations: UInt64
        var elapsed: Duration
        /// Building the first node's store (not part of the figure).
        var built: Duration
    }

    func run(in directory: URL) async throws -> Result {
        let holder = try NodeProcess("holder", in: directory)
        let newcomer = try NodeProcess("newcomer", in: directory, meshKeyFrom: holder)
        defer { for node in [holder, newcomer] { node.stop() } }

        let buildStart = ContinuousClock.now
        do {
            let identity = try holder.home.openIdentity(passphrase: nil)
            let store = try Store(directory: holder.home.directory, localUser: identity.publicKey)
            try await store.fillSynthetic(
                conversations: conversations, messagesPerConversation: messagesPerConversation, local: identity,
                peers: (0..<3).map { _ in NodeIdentity.generate() })
        }
        let built = ContinuousClock.now - buildStart

        try holder.start()
        let target = try await holder.heldOperations
        let expected = UInt64(conversations * (messagesPerConversation + 1))
        guard target >= expected else { throw BenchmarkError("the holder reports \(target) operations held, expected \(expected)") }

        let start = ContinuousClock.now
        try newcomer.start(peers: [holder])
        try await waitUntil("the newcomer to hold \(target) operations", seconds: 900, interval: .milliseconds(10)) {
            try await newcomer.heldOperations >= target
        }
        return Result(operations: target, elapsed: ContinuousClock.now - start, built: built)
    }
}
