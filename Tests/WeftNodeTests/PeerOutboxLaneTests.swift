import NIOCore
import NIOEmbedded
import Testing
import WeftCrypto
@testable import WeftNode

/// The per-connection outbox's two lanes: sync messages before chunks, and chunks bounded by
/// their own lane without counting as sync backlog.
@Suite("PeerOutbox: sync before bulk")
struct PeerOutboxLaneTests {
    static func outbox(bulkHighWatermark: Int = 1_000) -> PeerOutbox {
        let connection = PeerConnection(identity: NodeIdentity.generate().publicKey, channel: EmbeddedChannel())
        return PeerOutbox(connection: connection, highWatermark: 100, lowWatermark: 50, bulkHighWatermark: bulkHighWatermark)
    }

    static func message(_ byte: UInt8, _ count: Int) -> ByteBuffer { ByteBuffer(repeating: byte, count: count) }

    @Test("a sync message queued after chunks is written before them")
    func syncFirst() async {
        let outbox = Self.outbox()
        outbox.enqueueBulk(Self.message(1, 300))
        outbox.enqueueBulk(Self.message(2, 300))
        #expect(outbox.enqueue(Self.message(9, 10)))
        var order: [(UInt8, PeerOutbox.Lane)] = []
        for _ in 0..<3 {
            guard let (message, lane) = await outbox.next() else { break }
            order.append((message.getInteger(at: 0, as: UInt8.self) ?? 0, lane))
            _ = outbox.written(message.readableBytes, lane: lane)
        }
        #expect(order.map(\.0) == [9, 1, 2])
        #expect(order.map { $0.1 == .sync } == [true, false, false])
    }

    @Test("chunks past the bulk bound make bulk senders wait, and never tell the core the peer is slow")
    func bulkBound() async {
        let outbox = Self.outbox(bulkHighWatermark: 500)
        outbox.enqueueBulk(Self.message(1, 400))
        outbox.enqueueBulk(Self.message(2, 400))
        // 800 bytes of chunks: over the bulk bound, while the sync lane still has room.
        #expect(outbox.hasRoom)
        #expect(outbox.enqueue(Self.message(9, 10)), "sync is not held up by chunks")
        let waiter = Task { await outbox.waitForBulkRoom() }
        guard let (sync, syncLane) = await outbox.next() else { Issue.record("closed"); return }
        #expect(syncLane == .sync)
        #expect(!outbox.written(sync.readableBytes, lane: .sync), "the sync lane never passed its mark")
        guard let (chunk, lane) = await outbox.next() else { Issue.record("closed"); return }
        #expect(lane == .bulk)
        #expect(!outbox.written(chunk.readableBytes, lane: .bulk))  // 400 left: at or below 500
        await waiter.value
    }

    @Test("closing drops both lanes and wakes every waiter")
    func close() async {
        let outbox = Self.outbox(bulkHighWatermark: 10)
        outbox.enqueueBulk(Self.message(1, 100))
        let waiter = Task { await outbox.waitForBulkRoom() }
        outbox.close()
        await waiter.value
        #expect(await outbox.next() == nil)
    }
}
