import Testing
import WeftCrypto
import WeftModel
@testable import WeftSync

/// Helpers that read a core's actions.
extension Array where Element == SyncAction {
    /// Messages sent to `peer`, in order.
    func messages(to peer: ConnectionNumber) -> [SyncMessage] {
        compactMap { if case .send(peer, let message) = $0 { message } else { nil } }
    }

    /// Operations pushed to `peer`.
    func pushes(to peer: ConnectionNumber) -> [SignedOperation] {
        messages(to: peer).flatMap { message -> [SignedOperation] in
            if case .operations(let ops) = message, ops.isPush { ops.operations } else { [] }
        }
    }

    func announcements(to peer: ConnectionNumber) -> [SyncMessage.Announcement] {
        messages(to: peer).flatMap { message -> [SyncMessage.Announcement] in
            if case .ihave(let list) = message { list } else { [] }
        }
    }

    var applied: [SignedOperation] {
        flatMap { action -> [SignedOperation] in if case .apply(let ops, _) = action { ops } else { [] } }
    }
}

/// A core and the operations of one conversation, with helpers that play the store.
struct CoreHarness {
    var core: SyncCore
    let ops: [SignedOperation]
    var held: [SignedOperation] = []

    init(messages: Int = 5, configuration: SyncConfiguration = SyncConfiguration(), peers: [ConnectionNumber] = [1, 2, 3]) throws {
        ops = try SyncFixtures.conversation(messages: messages)
        core = SyncCore(configuration: configuration, localUser: SyncFixtures.users[30], summaries: [])
        for peer in peers {
            _ = core.handle(.connected(peer, user: SyncFixtures.users[Int(peer)]))
            _ = core.handle(.storeReadDone(peer))  // the outbox read a connection starts with: nothing waits
        }
    }

    /// The store committed `new` (from `source`, nil for local), with `pending` of them pending.
    mutating func store(_ new: [SignedOperation], from source: ConnectionNumber? = nil, pending: Int = 0, isPublished: Bool = true) -> [SyncAction] {
        held += new
        return core.handle(.stored(StoreOutcome(
            summaries: [SyncFixtures.summary(of: held, isPublished: isPublished)], stored: new, pending: pending,
            pendingByteCount: new.reduce(0) { $0 + SyncMessage.byteCount(of: $1) } * pending / Swift.max(1, new.count), source: source)))
    }

    /// The peer's message, and its actions. Reads from the store it asks for are done at
    /// once, as far as the core can tell (`.storeReadDone` follows each, as from the driver).
    mutating func receive(_ message: SyncMessage, from peer: ConnectionNumber) -> [SyncAction] {
        var actions = core.handle(.received(peer, message))
        var index = 0
        while index < actions.count {
            switch actions[index] {
            case .sendStored(let reader, _, _, _, _), .sendStoredOperations(let reader, _, _), .resendWaiting(let reader, _):
                actions += core.handle(.storeReadDone(reader))
            default: break
            }
            index += 1
        }
        return actions
    }

    /// The slots of `ops`' sequences (all of user 0, in the harness's conversation), as STORED
    /// acknowledges them.
    func slots(_ sequences: ClosedRange<UInt64>) -> SlotRange {
        SlotRange(conversation: ops[0].operation.conversation, author: SyncFixtures.users[0], sequences: sequences)
    }

    static func pushed(_ ops: [SignedOperation]) -> SyncMessage { .operations(SyncMessage.Operations(isPush: true, operations: ops)) }
}

@Suite("SyncCore: push, knowledge, Plumtree")
struct SyncCorePushTests {
    @Test("a received operation goes once to every peer but its source, which gets STORED")
    func forwardOnce() throws {
        var h = try CoreHarness()
        let applied = h.receive(CoreHarness.pushed([h.ops[0]]), from: 1)
        #expect(applied.applied == [h.ops[0]])
        let actions = h.store([h.ops[0]], from: 1)
        #expect(actions.pushes(to: 1).isEmpty)
        #expect(actions.pushes(to: 2) == [h.ops[0]])
        #expect(actions.pushes(to: 3) == [h.ops[0]])
        #expect(actions.messages(to: 1) == [.stored([h.slots(1...1)])])
    }

    @Test("an operation the store refuses is not counted as unsynced; one it stores is held, so neither")
    func refusedIsNotUnsynced() throws {
        var h = try CoreHarness()
        _ = h.store([h.ops[0]])
        let conversation = h.ops[0].operation.conversation
        // The peer pushes the next operation; the store refuses it (say, a forged signature).
        let forged = h.ops[1]
        #expect(h.receive(CoreHarness.pushed([forged]), from: 1).applied == [forged])
        _ = h.core.handle(.stored(StoreOutcome(
            summaries: [SyncFixtures.summary(of: h.held)], stored: [], refused: [forged.id], source: 1)))
        #expect(h.core.unsynced(conversation) == 0)
        // The genuine operation is taken later, stored, and is then held, not unsynced.
        #expect(h.receive(CoreHarness.pushed([forged]), from: 2).applied == [forged])
        _ = h.store([forged], from: 2)
        #expect(h.core.unsynced(conversation) == 0)
        // One stored pending past a gap counts the gap: the peer holds what comes before it.
        #expect(h.receive(CoreHarness.pushed([h.ops[4]]), from: 1).applied == [h.ops[4]])
        h.held.append(h.ops[4])
        _ = h.core.handle(.stored(StoreOutcome(
            summaries: [SyncFixtures.summary(of: h.held)], stored: [h.ops[4]], pending: 1, source: 1)))
        #expect(h.core.unsynced(conversation) == 3)
    }

    @Test("an operation a peer is known to hold is never sent to it")
    func neverToAHolder() throws {
        var h = try CoreHarness()
        // Peer 2 said in a WANT that it holds the first three; peer 3 announced the fourth.
        var heads = VersionVector()
        heads.set(SyncFixtures.users[0], 3)
        _ = h.store([h.ops[0]])  // publish the log here: the WANT is answered
        _ = h.receive(.want(SyncMessage.Want(entries: [SyncMessage.Want.Entry(conversation: h.ops[0].operation.conversation, beyond: heads)])), from: 2)
        _ = h.receive(.ihave([SyncMessage.Announcement(h.ops[3])]), from: 3)
        let actions = h.store(Array(h.ops[1...4]))
        #expect(actions.pushes(to: 1) == Array(h.ops[1...4]))
        #expect(actions.pushes(to: 2) == [h.ops[3], h.ops[4]])
        #expect(actions.pushes(to: 3) == [h.ops[1], h.ops[2], h.ops[4]])
        // Nothing goes twice: storing more pushes only the new one.
        let next = h.store([h.ops[5]])
        for peer: ConnectionNumber in [1, 2, 3] { #expect(next.pushes(to: peer) == [h.ops[5]]) }
    }

    @Test("an answer past a WANT's heads leaves out what the peer said it holds and what was pushed to it within the graft timeout, never older pushes")
    func answerSkipsWhatThePeerSaidItHolds() throws {
        var h = try CoreHarness()
        let conversation = h.ops[0].operation.conversation
        _ = h.store(Array(h.ops[0...4]))  // pushed to every peer at 0
        _ = h.receive(.ihave([SyncMessage.Announcement(h.ops[4])]), from: 1)
        _ = h.receive(.operations(SyncMessage.Operations(isPush: false, operations: [h.ops[3]])), from: 1)
        // Past the graft timeout (500 ms): pushes sent at 0 that did not arrive were lost.
        _ = h.core.handle(.tick(nowMilliseconds: 600))
        var heads = VersionVector()
        heads.set(SyncFixtures.users[0], 1)
        let want = SyncMessage.want(SyncMessage.Want(entries: [SyncMessage.Want.Entry(conversation: conversation, beyond: heads)]))
        let skipping = try #require(Self.answerSkipping(h.receive(want, from: 1)))
        #expect(skipping.contains(h.ops[4].id))
        #expect(skipping.contains(h.ops[3].id))
        #expect(!skipping.contains(h.ops[1].id) && !skipping.contains(h.ops[2].id))
        // Another peer said nothing: its answer leaves nothing out.
        #expect(h.receive(want, from: 2).contains(.sendStored(2, conversation, beyond: heads, skipping: HeldOperations())))

        // Pushed at 600 and asked for at 1,000: on its way, so left out; the older pushes not.
        _ = h.store([h.ops[5]])
        _ = h.core.handle(.tick(nowMilliseconds: 1_000))
        let inFlight = try #require(Self.answerSkipping(h.receive(want, from: 2)))
        #expect(inFlight.contains(h.ops[5].id))
        #expect(!(1...4).contains { inFlight.contains(h.ops[$0].id) })
        // Once the graft timeout passed, the push counts as lost and is answered again.
        _ = h.core.handle(.tick(nowMilliseconds: 1_200))
        #expect(h.receive(want, from: 2).contains(.sendStored(2, conversation, beyond: heads, skipping: HeldOperations())))
    }

    /// What the answer from the store among `actions` leaves out, if there is one.
    static func answerSkipping(_ actions: [SyncAction]) -> HeldOperations? {
        for case .sendStored(_, _, _, let skipping, _) in actions { return skipping }
        return nil
    }

    @Test("a pushed duplicate makes the peer lazy with PRUNE; lazy peers get IHAVE; PRUNE received does the same")
    func prune() throws {
        var h = try CoreHarness()
        _ = h.receive(CoreHarness.pushed([h.ops[0]]), from: 1)
        _ = h.store([h.ops[0]], from: 1)
        let duplicate = h.receive(CoreHarness.pushed([h.ops[0]]), from: 2)
        #expect(duplicate.applied.isEmpty)
        #expect(duplicate.messages(to: 2) == [.prune, .stored([h.slots(1...1)])])
        #expect(h.core.peerKnowledge(2)?.isEager == false)
        #expect(h.core.statistics.duplicatesReceived == 1)
        _ = h.receive(.prune, from: 3)
        #expect(h.core.peerKnowledge(3)?.isEager == false)

        let actions = h.store([h.ops[1]])
        #expect(actions.pushes(to: 1) == [h.ops[1]])
        #expect(actions.pushes(to: 2).isEmpty)
        #expect(actions.announcements(to: 2) == [SyncMessage.Announcement(h.ops[1])])
        #expect(actions.announcements(to: 3) == [SyncMessage.Announcement(h.ops[1])])
        // An operation asked for (not pushed) that is held is no reason to prune.
        _ = h.receive(.operations(SyncMessage.Operations(isPush: false, operations: [h.ops[1]])), from: 1)
        #expect(h.core.peerKnowledge(1)?.isEager == true)
    }

    @Test("an announced operation that does not arrive is asked for after the timeout (GRAFT), and the link is eager again")
    func graft() throws {
        var h = try CoreHarness()
        _ = h.receive(.prune, from: 2)
        _ = h.core.handle(.tick(nowMilliseconds: 1_000))
        _ = h.receive(.ihave([SyncMessage.Announcement(h.ops[0]), SyncMessage.Announcement(h.ops[1])]), from: 2)
        // ops[1] arrives in time from peer 1; ops[0] does not.
        _ = h.receive(CoreHarness.pushed([h.ops[1]]), from: 1)
        #expect(h.core.handle(.tick(nowMilliseconds: 1_400)).isEmpty)
        let actions = h.core.handle(.tick(nowMilliseconds: 1_500))
        let conversation = h.ops[0].operation.conversation
        #expect(actions.messages(to: 2) == [.want(SyncMessage.Want(isGraft: true, entries: [
            SyncMessage.Want.Entry(conversation: conversation, beyond: nil, ids: [h.ops[0].id])
        ]))])
        #expect(h.core.peerKnowledge(2)?.isEager == true)
        #expect(h.core.statistics.grafts == 1)

        // The other side: a grafting WANT makes that peer eager and is answered from the store.
        _ = h.receive(.prune, from: 3)
        _ = h.store([h.ops[0]])
        let answer = h.receive(.want(SyncMessage.Want(isGraft: true, entries: [
            SyncMessage.Want.Entry(conversation: conversation, beyond: nil, ids: [h.ops[0].id])
        ])), from: 3)
        #expect(answer == [.sendStoredOperations(3, [h.ops[0].id])])
        #expect(h.core.peerKnowledge(3)?.isEager == true)
    }
}

extension SyncCorePushTests {
    @Test("pushes that arrive late lengthen the graft timeout: twice the lateness, at most the configured maximum")
    func adaptiveGraftTimeout() throws {
        var h = try CoreHarness()
        _ = h.receive(.prune, from: 2)
        _ = h.core.handle(.tick(nowMilliseconds: 1_000))
        // ops[0] is announced at 1,000 and pushed 450 ms later: in time, but late.
        _ = h.receive(.ihave([SyncMessage.Announcement(h.ops[0])]), from: 2)
        _ = h.core.handle(.tick(nowMilliseconds: 1_450))
        _ = h.receive(CoreHarness.pushed([h.ops[0]]), from: 1)
        #expect(h.core.graftTimeout == 900)
        // ops[1], announced at 2,000, is asked for after 900 ms, not 500.
        _ = h.core.handle(.tick(nowMilliseconds: 2_000))
        _ = h.receive(.ihave([SyncMessage.Announcement(h.ops[1])]), from: 2)
        #expect(h.core.handle(.tick(nowMilliseconds: 2_899)).messages(to: 2).isEmpty)
        #expect(h.core.handle(.tick(nowMilliseconds: 2_900)).messages(to: 2).count == 1)
        // Its push arrives after the graft, 3 s after the announcement: the timeout follows,
        // up to the maximum (5 s).
        _ = h.core.handle(.tick(nowMilliseconds: 5_000))
        _ = h.receive(CoreHarness.pushed([h.ops[1]]), from: 1)
        #expect(h.core.graftTimeout == 5_000)
    }

    @Test("causes the store names are asked for by identifier, only those still missing at the timeout")
    func causesByIdentifier() throws {
        var h = try CoreHarness()
        _ = h.store([h.ops[0]], from: 1)
        // ops[3] waits for ops[1] and ops[2]; the store says so.
        h.held.append(h.ops[3])
        var outcome = StoreOutcome(
            summaries: [SyncFixtures.summary(of: h.held)], stored: [h.ops[3]], pending: 1, source: 1)
        let conversation = h.ops[0].operation.conversation
        outcome.missingCauses = [conversation: [h.ops[1].id, h.ops[2].id]]
        _ = h.core.handle(.stored(outcome))
        // ops[1] arrives meanwhile from another peer; only ops[2] is asked for.
        _ = h.receive(CoreHarness.pushed([h.ops[1]]), from: 2)
        #expect(h.core.handle(.tick(nowMilliseconds: 499)).messages(to: 1).isEmpty)
        #expect(h.core.handle(.tick(nowMilliseconds: 500)).messages(to: 1) == [.want(SyncMessage.Want(entries: [
            SyncMessage.Want.Entry(conversation: conversation, beyond: nil, ids: [h.ops[2].id])
        ]))])
        #expect(h.core.statistics.causeRequests == 1)
    }
}

@Suite("SyncCore: bounds, publication, catch-up")
struct SyncCoreBoundsTests {
    @Test("past the pending bound a peer's out-of-chain operations are dropped; the next in chain is taken; causes are asked for")
    func pendingBound() throws {
        var configuration = SyncConfiguration()
        configuration.maxPendingOperationsPerPeer = 2
        var h = try CoreHarness(messages: 8, configuration: configuration)
        // Operations 3 and 4 (sequences 4, 5) arrive without 0...2: they are pending.
        _ = h.receive(CoreHarness.pushed([h.ops[3], h.ops[4]]), from: 1)
        let outcome = h.store([h.ops[3], h.ops[4]], from: 1, pending: 2)
        let conversation = h.ops[0].operation.conversation
        // The causes are asked for once a graft timeout has passed without them.
        #expect(outcome.messages(to: 1) == [.stored([h.slots(4...5)])])
        #expect(h.core.handle(.tick(nowMilliseconds: 499)).isEmpty)
        #expect(h.core.handle(.tick(nowMilliseconds: 500)).messages(to: 1) == [.want(SyncMessage.Want(entries: [
            SyncMessage.Want.Entry(conversation: conversation, beyond: VersionVector())
        ]))])
        #expect(h.core.peerKnowledge(1)?.pendingOperations == 2)
        let actions = h.receive(CoreHarness.pushed([h.ops[0], h.ops[6], h.ops[7]]), from: 1)
        #expect(actions.applied == [h.ops[0]])
        #expect(actions.contains { if case .dropped(1, count: 2, _) = $0 { true } else { false } })
        #expect(h.core.statistics.operationsDropped == 2)
        // A first operation in a log not held here (made-up or real causes, it can only wait)
        // is refused too; a log's creation, and what follows it in the same message, is taken.
        var other = Author(identity: SyncFixtures.identities[2])
        let elsewhere = try SyncFixtures.conversation(messages: 0, author: 1)
        var replica = Replica(localUser: nil)
        _ = replica.apply(verified: elsewhere)
        let first = other.write(SyncFixtures.text("first"), in: elsewhere[0].operation.conversation, replica: replica, wallMilliseconds: 5_000)
        #expect(first.operation.sequence == 1)
        #expect(h.receive(CoreHarness.pushed([first]), from: 1).applied.isEmpty)
        #expect(h.core.statistics.operationsDropped == 3)
        #expect(h.receive(CoreHarness.pushed([elsewhere[0], first]), from: 1).applied == [elsewhere[0], first])
        // Another peer is not bound by peer 1's count.
        #expect(h.receive(CoreHarness.pushed([h.ops[6]]), from: 2).applied == [h.ops[6]])
        // The gap closes: heads jump past the pending operations and the count is released.
        _ = h.store([h.ops[0], h.ops[1], h.ops[2]], from: 1)
        #expect(h.core.peerKnowledge(1)?.pendingOperations == 0)
    }

    @Test("causes that arrive within the graft timeout are not asked for")
    func causesOnTheirWay() throws {
        var h = try CoreHarness()
        _ = h.store([h.ops[0]], from: 1)
        _ = h.store([h.ops[2]], from: 1, pending: 1)
        _ = h.store([h.ops[1]], from: 2)
        #expect(h.core.handle(.tick(nowMilliseconds: 1_000)).messages(to: 1).isEmpty)
    }

    @Test("a peer that is not writable never has more than the bound queued, and gets everything once writable")
    func flowControl() throws {
        var configuration = SyncConfiguration()
        configuration.maxQueuedBytesPerPeer = 1_500
        var h = try CoreHarness(messages: 40, configuration: configuration, peers: [1])
        _ = h.core.handle(.writable(1, false))
        var sent: [SyncMessage] = []
        for op in h.ops {
            let actions = h.store([op])
            sent += actions.messages(to: 1)
            #expect(h.core.peerKnowledge(1)!.queuedBytes <= 1_500)
        }
        #expect(sent.isEmpty)
        #expect(h.core.peerKnowledge(1)?.isBehind == true)
        let resumed = h.core.handle(.writable(1, true))
        // What the driver does: send the queue, then read the store for `sendStored`.
        var delivered = Set(resumed.pushes(to: 1).map(\.id))
        for action in resumed {
            if case .sendStored(1, _, let beyond, _, _) = action {
                for op in h.held where op.operation.sequence > beyond[op.operation.author] { delivered.insert(op.id) }
            }
        }
        #expect(delivered == Set(h.ops.map(\.id)))
        #expect(h.core.peerKnowledge(1)?.queuedBytes == 0)
        #expect(h.core.peerKnowledge(1)?.isBehind == false)
        // Caught up: the next operation is pushed at once.
        let more = try SyncFixtures.conversation(messages: 0, author: 3)
        #expect(h.core.handle(.stored(StoreOutcome(summaries: [SyncFixtures.summary(of: more)], stored: more))).pushes(to: 1) == more)
    }

    @Test("an unpublished log is neither pushed, summarised nor served; once published, all of it goes to every peer")
    func publication() throws {
        var h = try CoreHarness(peers: [1, 2])
        let conversation = h.ops[0].operation.conversation
        #expect(h.store([h.ops[0], h.ops[1]], isPublished: false).isEmpty)
        let served = h.receive(.want(SyncMessage.Want(entries: [SyncMessage.Want.Entry(conversation: conversation, beyond: VersionVector())])), from: 1)
        #expect(served.isEmpty)
        let published = h.store([h.ops[2]])
        #expect(published.pushes(to: 1).isEmpty)
        #expect(published.contains(.sendStored(1, conversation, beyond: VersionVector(), skipping: HeldOperations())))
        #expect(published.contains(.sendStored(2, conversation, beyond: VersionVector(), skipping: HeldOperations())))
    }

    @Test("unpublished logs are left out of reconciliation")
    func reconciliationLeavesOutUnpublished() throws {
        let published = try SyncFixtures.conversation(messages: 1)
        let local = try SyncFixtures.conversation(messages: 0, author: 2)
        var core = SyncCore(localUser: SyncFixtures.users[0], summaries: [
            SyncFixtures.summary(of: published), SyncFixtures.summary(of: local, isPublished: false),
        ])
        // A peer whose user identifier is above ours: this node starts the reconciliation.
        let peerUser = SyncFixtures.users.first { $0 > SyncFixtures.users[0] }!
        let actions = core.handle(.connected(7, user: peerUser))
        let summary = SyncFixtures.summary(of: published)
        let set = ReconciliationSet([(summary.conversation, summary.digest)])
        #expect(actions.messages(to: 7) == [.have(Reconciler(set: set).initiate())])
    }

    @Test("a SUMMARY's differing logs are asked for most recently active first; unsynced counts what peers hold beyond")
    func catchUpOrder() throws {
        let logs = try (0..<3).map { try SyncFixtures.conversation(messages: 2, author: $0, startingAt: 1_000 * UInt64($0 + 1)) }
        var core = SyncCore(localUser: SyncFixtures.users[9], summaries: [SyncFixtures.summary(of: Array(logs[1][0...1]))])
        _ = core.handle(.connected(1, user: SyncFixtures.users[1]))
        // The peer holds all three; its summary lists them by conversation identifier.
        let entries = logs.map { SyncFixtures.summary(of: $0) }.sorted { $0.conversation < $1.conversation }.map {
            SyncMessage.Summary.Entry(conversation: $0.conversation, digest: $0.digest, lastActivity: $0.lastActivity)
        }
        let actions = core.handle(.received(1, .summary(SyncMessage.Summary(isFinal: true, entries: entries))))
        guard case .want(let want)? = actions.messages(to: 1).first else {
            Issue.record("no WANT: \(actions)")
            return
        }
        #expect(want.entries.map(\.conversation) == [2, 1, 0].map { logs[$0][0].operation.conversation })
        var own = VersionVector()
        own.set(SyncFixtures.users[1], 2)
        #expect(want.entries[1].beyond == own)
        // The peer's WANT tells its heads: 3 of author 1, one more than held here.
        var theirs = VersionVector()
        theirs.set(SyncFixtures.users[1], 3)
        let conversation = logs[1][0].operation.conversation
        _ = core.handle(.received(1, .want(SyncMessage.Want(entries: [SyncMessage.Want.Entry(conversation: conversation, beyond: theirs)]))))
        #expect(core.unsynced(conversation) == 1)
        #expect(core.unsynced(logs[0][0].operation.conversation) == 0)
    }
}
