import Foundation
import Logging
import NIOCore
import Synchronization
import Weft
import WeftCrypto
import WeftModel
import WeftNode
@_spi(Benchmarks) import WeftStore
import WeftSync

/// Two in-process nodes (stores in memory) holding the same `conversations` conversations
/// (a creation and one message each, built with `Store.fillSynthetic` on one and received by
/// the other), `missing` of the messages held by the first only, connect. The figure is the
/// DATA payload bytes both received (sync messages; the transport's framing, 16 bytes of tag
/// and a header per frame, is not counted) until both hold the same and no sync message has
/// moved for a second (anti-entropy runs every 30 s, after the window).
struct Reconciliation {
    var conversations = 10_000
    var missing = 0

    struct Result {
        var bytes: Int
        /// The bytes by sync message type ("HAVE", "SUMMARY"...).
        var bytesByType: [String: Int]
        /// Sync-message bytes of the missing operations (`SyncMessage.byteCount(of:)`).
        var missingBytes: Int
        var elapsed: Duration
    }

    private final class Counter: Sendable {
        let bytes = Mutex(0)
        let byType = Mutex([String: Int]())
        let last = Mutex(ContinuousClock.now)
        let listening = Mutex<SocketAddress?>(nil)
        func take(_ event: NodeEvent) {
            switch event {
            case .data(_, let payload):
                bytes.withLock { $0 += payload.readableBytes }
                let type = payload.getInteger(at: payload.readerIndex, as: UInt8.self).flatMap(SyncMessageType.init(rawValue:))
                byType.withLock { $0[type.map(\.description) ?? "?", default: 0] += payload.readableBytes }
                last.withLock { $0 = .now }
            case .listening(let address):
                listening.withLock { $0 = address }
            default:
                break
            }
        }
    }

    func run() async throws -> Result {
        let meshKey = MeshKey.generate()
        var logger = Logger(label: "bench.reconciliation")
        logger.logLevel = .critical
        let counter = Counter()
        // The stores are filled before their nodes exist: a replicator reads the store's
        // summaries when it is made.
        let firstIdentity = NodeIdentity.generate()
        let secondIdentity = NodeIdentity.generate()
        let firstStore = try Store(directory: nil, localUser: firstIdentity.publicKey)
        let secondStore = try Store(directory: nil, localUser: secondIdentity.publicKey)
        try await firstStore.fillSynthetic(
            conversations: conversations, messagesPerConversation: 1, local: firstIdentity, peers: [NodeIdentity.generate()])
        let secondAuthor = try LocalAuthor(store: secondStore, identity: secondIdentity)
        var missingBytes = 0
        var batch: [SignedOperation] = []
        for (index, summary) in try firstStore.logSummaries().enumerated() {
            var operations = try firstStore.operations(in: summary.conversation)
            if index < missing, let last = operations.popLast() { missingBytes += SyncMessage.byteCount(of: last) }
            batch += operations
            if batch.count >= 4_000 {
                _ = try await secondAuthor.receive(batch)
                batch = []
            }
        }
        if !batch.isEmpty { _ = try await secondAuthor.receive(batch) }

        func makeNode(_ name: String, _ identity: NodeIdentity, _ store: Store) throws -> InProcessNode {
            try InProcessNode(
                configuration: MeshNode.Configuration(identity: identity, meshKey: meshKey, displayName: name),
                store: store, logger: logger, onEvent: { counter.take($0) })
        }
        let first = try makeNode("first", firstIdentity, firstStore)
        let second = try makeNode("second", secondIdentity, secondStore)

        return try await withThrowingTaskGroup { group in
            group.addTask { try await first.run() }
            defer { group.cancelAll() }
            try await waitUntil("the first node to listen", seconds: 20) { counter.listening.withLock { $0 } != nil }
            let address = counter.listening.withLock { $0 }!
            group.addTask { try await second.run() }
            let start = ContinuousClock.now
            second.node.connect(to: PeerAddress(host: address.ipAddress!, port: address.port!))
            try await waitUntil("both to hold the same, and a quiet second", seconds: 60, interval: .milliseconds(20)) {
                let (held, other) = (await first.replicator.heldOperations, await second.replicator.heldOperations)
                return held == other
                    && counter.bytes.withLock { $0 } > 0
                    && ContinuousClock.now - counter.last.withLock { $0 } > .seconds(1)
            }
            let elapsed = counter.last.withLock { $0 } - start
            return Result(
                bytes: counter.bytes.withLock { $0 }, bytesByType: counter.byType.withLock { $0 }, missingBytes: missingBytes, elapsed: elapsed)
        }
    }
}
