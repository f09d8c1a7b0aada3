import Foundation
import Synchronization
import Testing
import Weft
import WeftCrypto
import WeftModel
import WeftStore

@Suite("delivery: per-recipient failed, and the delivery events of the local user's messages")
struct DeliveryTests {
    /// Collects delivery events in the background.
    final class EventLog: Sendable {
        private final class Events: Sendable {
            let value = Mutex<[DeliveryEvent]>([])
        }

        private let events = Events()
        private let task: Task<Void, Never>

        init(_ client: WeftClient) {
            let stream = client.deliveryEvents()
            let events = self.events
            task = Task { for await event in stream { events.value.withLock { $0.append(event) } } }
        }

        deinit { task.cancel() }

        var all: [DeliveryEvent] { events.value.withLock { $0 } }

        /// Waits (polling, up to 10 s) until `count` events arrived.
        func wait(for count: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while all.count < count {
                guard ContinuousClock.now < deadline else {
                    Issue.record("\(all.count) delivery events of \(count) within 10 s: \(all)", sourceLocation: sourceLocation)
                    return
                }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    @Test("durations read as people say them")
    func durations() {
        #expect(DeliveryFailure.expired(timeToLive: 12 * 3_600_000).description == "expired: not delivered within 12 h")
        #expect(DeliveryFailure.duration(90 * 60_000) == "1 h 30 min")
        #expect(DeliveryFailure.duration(2 * 86_400_000 + 5_000) == "2 d 5 s")
        #expect(DeliveryFailure.duration(45_000) == "45 s")
        #expect(DeliveryFailure.duration(250) == "250 ms")
        #expect(DeliveryFailure.rejected("bad signature").description == "rejected: bad signature")
    }

    @Test("sent, then per recipient delivered, read, failed with the reason; a delivery after the failure wins")
    func events() async throws {
        let clock = TestClock()
        let alice = try makeClient(clock: clock)
        let bob = try makeClient(clock: clock)
        let carol = try makeClient(clock: clock)
        let bobUser = bob.localUser
        let carolUser = carol.localUser
        let log = EventLog(alice)
        let conversation = try await alice.createConversation(with: [bobUser, carolUser])
        let message = try await alice.send([.text("hello")], in: conversation.id)
        #expect(try await alice.message(message.id)?.recipientStatus == [bobUser: .pending, carolUser: .pending])

        try await alice.markSent(message.id)
        try await log.wait(for: 1)
        #expect(log.all == [DeliveryEvent(message: message.id, conversation: conversation.id, recipient: nil, kind: .sent)])

        // Bob's node delivers; carol's never does within the time to live.
        try await sync(alice, to: bob)
        try await sync(bob, to: alice)
        try await log.wait(for: 2)
        #expect(log.all.last == DeliveryEvent(message: message.id, conversation: conversation.id, recipient: bobUser, kind: .delivered))

        clock.advance(12 * 3_600_000)
        _ = try await alice.store.expireOutbox(wallMilliseconds: clock.read())
        try await log.wait(for: 3)
        let reason = "expired: not delivered within 12 h"
        #expect(log.all.last == DeliveryEvent(message: message.id, conversation: conversation.id, recipient: carolUser, kind: .failed(reason: reason)))
        let failed = try #require(try await alice.message(message.id))
        #expect(failed.recipientStatus == [bobUser: .delivered, carolUser: .failed])
        #expect(failed.failureReason(for: carolUser) == reason)
        #expect(failed.failureReason(for: bobUser) == nil)
        // Once only.
        _ = try await alice.store.expireOutbox(wallMilliseconds: clock.read() + 1)

        // Bob reads; carol's node comes back and delivers late: later facts win.
        try await bob.markAsRead(message.id)
        try await sync(bob, to: alice)
        try await sync(alice, to: carol)
        try await sync(carol, to: alice)
        try await log.wait(for: 5)
        #expect(Array(log.all.suffix(2)) == [
            DeliveryEvent(message: message.id, conversation: conversation.id, recipient: bobUser, kind: .read),
            DeliveryEvent(message: message.id, conversation: conversation.id, recipient: carolUser, kind: .delivered),
        ])
        let late = try #require(try await alice.message(message.id))
        #expect(late.recipientStatus == [bobUser: .read, carolUser: .delivered])
        #expect(late.failureReason(for: carolUser) == nil)
        #expect(log.all.count == 5)
    }

    @Test("a node's refusal fails the recipients not yet delivered, with its reason; a message never sent fails for everyone when it expires")
    func rejectedAndUnsent() async throws {
        let clock = TestClock()
        let alice = try makeClient(clock: clock)
        let bob = NodeIdentity.generate().publicKey
        let conversation = try await alice.createConversation(with: [bob])
        let first = try await alice.send([.text("one")], in: conversation.id)
        let second = try await alice.send([.text("two")], in: conversation.id)
        let failed = try await alice.store.failDelivery(of: first.id, reason: .rejected("its timestamp is ahead"), wallMilliseconds: clock.read())
        #expect(failed == [bob])
        #expect(try await alice.message(first.id)?.failureReason(for: bob) == "rejected: its timestamp is ahead")
        #expect(try await alice.store.failDelivery(of: first.id, reason: .rejected("again"), wallMilliseconds: clock.read()).isEmpty)
        let unknown = OperationID(bytes: [UInt8](repeating: 7, count: 32))!
        await #expect(throws: StoreError.self) {
            try await alice.store.failDelivery(of: unknown, reason: .rejected("?"), wallMilliseconds: clock.read())
        }

        clock.advance(12 * 3_600_000)
        let expired = try await alice.store.expireOutbox(wallMilliseconds: clock.read())
        #expect(Set(expired.map(\.message)) == [first.id, second.id])
        #expect(try await alice.message(second.id)?.recipientStatus == [bob: .failed])
        #expect(try await alice.message(second.id)?.failureReason(for: bob) == "expired: not delivered within 12 h")
        #expect(try await alice.message(first.id)?.failureReason(for: bob) == "rejected: its timestamp is ahead", "the first reason stays")
    }
}
