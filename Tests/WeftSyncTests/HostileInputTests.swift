import Testing
import WeftCrypto
import WeftModel
@testable import WeftSync

/// What a mesh member can make the sync core hold or send, and that every message the core
/// builds from it still encodes: the encoders throw past their limits, and the core splits
/// and bounds what peers feed it (issue 20's first two attacks, at the core).
@Suite("Hostile input: encoder limits, split WANTs, bounded memory of peers")
struct HostileInputTests {
    /// `count` distinct made-up operation identifiers.
    static func identifiers(_ count: Int, seed: UInt64 = 1) -> [OperationID] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            OperationID(bytes: (0..<OperationID.byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })!
        }
    }

    /// Heads of 30,000 authors: more than one WANT body holds (about 26,000).
    static let manyAuthors: VersionVector = {
        var heads = VersionVector()
        for _ in 0..<30_000 { heads.set(NodeIdentity.generate().publicKey, 1) }
        return heads
    }()

    // MARK: - Encoders

    @Test("a WANT entry of 70,000 identifiers throws listTooLong instead of trapping")
    func wantListTooLong() {
        let entry = SyncMessage.Want.Entry(conversation: .random(), beyond: nil, ids: Self.identifiers(70_000).sorted())
        #expect(throws: SyncMessageError.listTooLong(.want, 70_000)) { try SyncMessage.want(.init(entries: [entry])).encode() }
    }

    @Test("a WANT of 30,000 identifiers (under the count, over 1 MiB) throws tooLarge")
    func wantTooLarge() {
        let entry = SyncMessage.Want.Entry(conversation: .random(), beyond: nil, ids: Self.identifiers(40_000).sorted())
        let message = SyncMessage.want(.init(entries: [entry]))
        #expect(throws: SyncMessageError.tooLarge(message.encodedByteCount - 1)) { try message.payload() }
    }

    @Test("IHAVE, STORED, SUMMARY and OPERATIONS lists past 65,535 items throw listTooLong")
    func otherListsTooLong() throws {
        let conversation = ConversationID.random()
        let ids = Self.identifiers(65_536)
        let announcements = ids.map {
            SyncMessage.Announcement(conversation: conversation, author: SyncFixtures.users[0], sequence: 1, id: $0)
        }
        #expect(throws: SyncMessageError.listTooLong(.ihave, 65_536)) { try SyncMessage.ihave(announcements).encode() }
        let ranges = (1...65_536).map { SlotRange(conversation: conversation, author: SyncFixtures.users[0], sequences: UInt64($0)...UInt64($0)) }
        #expect(throws: SyncMessageError.listTooLong(.stored, 65_536)) { try SyncMessage.stored(ranges).encode() }
        let entries = (0..<65_536).map { _ in
            SyncMessage.Summary.Entry(conversation: .random(), digest: SetDigest(), lastActivity: HLCTimestamp(rawValue: 0))
        }
        #expect(throws: SyncMessageError.listTooLong(.summary, 65_536)) { try SyncMessage.summary(.init(isFinal: true, entries: entries)).encode() }
        let operation = try SyncFixtures.conversation(messages: 0)[0]
        let operations = SyncMessage.operations(.init(isPush: true, operations: Array(repeating: operation, count: 65_536)))
        #expect(throws: SyncMessageError.listTooLong(.operations, 65_536)) { try operations.encode() }
    }

    @Test("a WANT heads list of more authors than fit a body throws instead of trapping")
    func headsTooMany() {
        let heads = Self.manyAuthors
        let message = SyncMessage.want(.init(entries: [.init(conversation: .random(), beyond: heads)]))
        #expect(throws: SyncMessageError.self) { try message.encode() }
    }

    // MARK: - Splitting

    @Test("WANT entries of any size split into messages that encode, each naming a log once, losing no identifier")
    func splitWants() throws {
        let big = ConversationID.random()
        let small = ConversationID.random()
        var heads = VersionVector()
        heads.set(SyncFixtures.users[0], 7)
        let ids = Self.identifiers(70_000).sorted()
        let entries = [
            SyncMessage.Want.Entry(conversation: big, beyond: heads, ids: ids),
            SyncMessage.Want.Entry(conversation: small, beyond: nil, ids: Array(Self.identifiers(3, seed: 2).sorted())),
        ]
        let messages = SyncMessage.Want.messages(entries, isGraft: true, softLimit: 256 << 10)
        #expect(messages.count > 1)
        var seen: [OperationID] = []
        var headsSent = 0
        for want in messages {
            #expect(want.isGraft)
            let payload = try SyncMessage.want(want).encode()
            #expect(payload.count - 1 <= SyncEnvelope.maxBodyByteCount)
            #expect(try SyncMessage(payload: payload) == .want(want))
            #expect(Set(want.entries.map(\.conversation)).count == want.entries.count)
            for entry in want.entries where entry.conversation == big {
                seen += entry.ids
                if entry.beyond != nil { headsSent += 1 }
                #expect(entry.beyond == nil || entry.beyond == heads)
            }
        }
        #expect(seen == ids)
        #expect(headsSent == 1)
    }

    @Test("heads of more authors than fit a body keep the authors that fit")
    func splitHeads() throws {
        let heads = Self.manyAuthors
        let messages = SyncMessage.Want.messages([.init(conversation: .random(), beyond: heads)], isGraft: false, softLimit: 256 << 10)
        #expect(messages.count == 1)
        let payload = try SyncMessage.want(messages[0]).encode()
        #expect(payload.count - 1 <= SyncEnvelope.maxBodyByteCount)
        let kept = try #require(messages[0].entries[0].beyond)
        #expect(kept.entries.count > 20_000 && kept.entries.count < 30_000)
        #expect(kept.entries.allSatisfy { heads[$0.key] == $0.value })
    }

    // MARK: - The core

    /// Every message among `actions` encodes.
    static func expectEncodable(_ actions: [SyncAction]) throws -> [SyncMessage.Want] {
        var wants: [SyncMessage.Want] = []
        for case .send(_, let message) in actions {
            _ = try message.encode()
            if case .want(let want) = message { wants.append(want) }
        }
        return wants
    }

    @Test("70,000 made-up announcements of one log: the core remembers a bounded number and grafts them in messages that encode")
    func announcementFlood() throws {
        var h = try CoreHarness()
        let conversation = ConversationID.random()
        let ids = Self.identifiers(70_000)
        for chunk in ids.chunked(12_000) {
            let announcements = chunk.enumerated().map { index, id in
                SyncMessage.Announcement(conversation: conversation, author: SyncFixtures.users[9], sequence: UInt64(index + 2), id: id)
            }
            _ = h.receive(.ihave(announcements), from: 1)
        }
        let configuration = h.core.configuration
        #expect(h.core.missing.count == min(configuration.maxMissingOperationsPerLog, configuration.maxMissingOperationsPerPeer))
        // Another peer's announcements of another log still count.
        let other = SyncMessage.Announcement(conversation: .random(), author: SyncFixtures.users[9], sequence: 5, id: Self.identifiers(1, seed: 9)[0])
        _ = h.receive(.ihave([other]), from: 2)
        #expect(h.core.missing[other.id] != nil)

        let wants = try Self.expectEncodable(h.core.handle(.tick(nowMilliseconds: 600)))
        let grafted = wants.flatMap(\.entries).filter { $0.conversation == conversation }.flatMap(\.ids)
        #expect(grafted.count == h.core.missing.count - 1)
        #expect(Set(grafted).count == grafted.count)
        // Three tries each, then they are forgotten, with their counts.
        for time in [1_200, 1_800, 2_400] { _ = try Self.expectEncodable(h.core.handle(.tick(nowMilliseconds: UInt64(time)))) }
        #expect(h.core.missing.isEmpty)
        #expect(h.core.missingByUser.isEmpty && h.core.missingByLog.isEmpty)
    }

    @Test("3 operations naming 15,000 missing causes each: bounded cause requests, the log asked for past its heads, messages that encode")
    func causeFlood() throws {
        var h = try CoreHarness()
        let conversation = h.ops[0].operation.conversation
        _ = h.store([h.ops[0]])
        var outcome = StoreOutcome(summaries: [SyncFixtures.summary(of: [h.ops[0]])], stored: Array(h.ops[1...3]), pending: 3, source: 1)
        outcome.missingCauses = [conversation: Self.identifiers(45_000)]
        _ = h.core.handle(.stored(outcome))
        let request = try #require(h.core.peers[1]?.causeRequests[conversation])
        #expect(request.causes.count == h.core.configuration.maxCauseRequestsPerLog)
        #expect(request.askPastHeads)

        let wants = try Self.expectEncodable(h.core.handle(.tick(nowMilliseconds: 600)))
        let entries = wants.flatMap(\.entries).filter { $0.conversation == conversation }
        #expect(entries.flatMap(\.ids).count == h.core.configuration.maxCauseRequestsPerLog)
        #expect(entries.contains { $0.beyond != nil })
        #expect(h.core.peers[1]?.causeRequestCount == 0)
    }

    @Test("the pending bound holds per peer identity: a reconnect does not start it afresh")
    func pendingPerIdentity() throws {
        var configuration = SyncConfiguration()
        configuration.maxPendingOperationsPerPeer = 2
        var h = try CoreHarness(messages: 8, configuration: configuration)
        _ = h.receive(.operations(.init(isPush: false, operations: [h.ops[2], h.ops[3]])), from: 1)
        _ = h.core.handle(.stored(StoreOutcome(
            summaries: [LogSummary(conversation: h.ops[0].operation.conversation)], stored: [h.ops[2], h.ops[3]], pending: 2, source: 1)))
        // The same identity, on a new connection.
        _ = h.core.handle(.disconnected(1))
        _ = h.core.handle(.connected(9, user: SyncFixtures.users[1]))
        #expect(h.core.peerKnowledge(9)?.pendingOperations == 2)
        let actions = h.receive(.operations(.init(isPush: false, operations: [h.ops[5], h.ops[6]])), from: 9)
        #expect(actions.contains { if case .dropped(9, 2, _) = $0 { true } else { false } })
        // Another identity is not held to it.
        let others = h.receive(.operations(.init(isPush: false, operations: [h.ops[5]])), from: 2)
        #expect(others.contains { if case .apply = $0 { true } else { false } })
        // Released when the store drops them (expired), and the identity is forgotten.
        _ = h.core.handle(.pendingDropped([h.ops[2].id, h.ops[3].id]))
        #expect(h.core.peerKnowledge(9)?.pendingOperations == 0)
        #expect(h.core.pendingByUser.isEmpty)
    }

    @Test("reads from the store: none while a peer is not writable, two at most under way, the rest waiting and bounded")
    func boundedReads() throws {
        var configuration = SyncConfiguration()
        configuration.maxDeferredIDsPerPeer = 10_000
        var h = try CoreHarness(configuration: configuration)
        var logs: [ConversationID] = []
        for index in 0..<6 {
            let ops = try SyncFixtures.conversation(messages: 1, startingAt: UInt64(1_000 + index))
            logs.append(ops[0].operation.conversation)
            _ = h.core.handle(.stored(StoreOutcome(summaries: [SyncFixtures.summary(of: ops)], stored: ops)))
        }
        func reads(_ actions: [SyncAction]) -> Int {
            actions.filter { if case .sendStored = $0 { true } else if case .sendStoredOperations = $0 { true } else { false } }.count
        }
        let want = SyncMessage.want(.init(entries: logs.sorted().map { .init(conversation: $0, beyond: VersionVector()) }))
        _ = h.core.handle(.writable(1, false))
        #expect(reads(h.core.handle(.received(1, want))) == 0)
        // Asked again and again while not reading: nothing more is held than one per log.
        for _ in 0..<100 { #expect(reads(h.core.handle(.received(1, want))) == 0) }
        #expect(h.core.peers[1]?.behind.count == 6)
        let byID = SyncMessage.want(.init(entries: [.init(conversation: logs[0], beyond: nil, ids: Self.identifiers(8_000).sorted())]))
        for _ in 0..<3 { _ = h.core.handle(.received(1, byID)) }
        #expect(h.core.peers[1]?.deferredIDs.count == 10_000)
        #expect(h.core.statistics.requestsDropped == 14_000)

        var started = reads(h.core.handle(.writable(1, true)))
        #expect(started == 2)
        var done = 0
        while done < started {
            started += reads(h.core.handle(.storeReadDone(1)))
            done += 1
            #expect(h.core.peers[1]!.storeReads <= 2)
        }
        // Six logs, then 10,000 identifiers in reads of 4,096.
        #expect(started == 6 + 3)
        #expect(h.core.peers[1]?.hasDeferredReads == false)
    }
}
