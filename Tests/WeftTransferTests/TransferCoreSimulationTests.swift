import Testing
@testable import WeftTransfer

/// SplitMix64: a small seeded generator, so every simulated schedule replays from its seed.
struct TransferCoreRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
}

/// A peer's name whose hash depends on a salt that every name of one run shares: two runs with
/// different salts lay out the core's dictionaries and sets differently, and must still give
/// the same actions.
struct SaltedPeer: Hashable, Comparable, Sendable, CustomStringConvertible {
    let id: Int
    let salt: UInt64

    static func == (a: SaltedPeer, b: SaltedPeer) -> Bool { a.id == b.id }
    static func < (a: SaltedPeer, b: SaltedPeer) -> Bool { a.id < b.id }
    func hash(into hasher: inout Hasher) {
        hasher.combine(salt)
        hasher.combine(id)
    }
    var description: String { "p\(id)" }
}

/// A content's name, salted the same way.
struct SaltedContent: Hashable, Sendable, CustomStringConvertible {
    let name: String
    let salt: UInt64

    static func == (a: SaltedContent, b: SaltedContent) -> Bool { a.name == b.name }
    func hash(into hasher: inout Hasher) {
        hasher.combine(salt)
        hasher.combine(name)
    }
    var description: String { name }
}

/// A seeded simulation of one node downloading two contents (one of them resumed) from six
/// peers with random latencies and losses, one of which corrupts chunks, one of which holds
/// only part of a content, one of which leaves and comes back; the store fills up once for a
/// while. The driver plays every peer and the store and checks the core's bounds after every
/// event.
struct TransferCoreSimulation {
    typealias Core = TransferCore<SaltedContent, SaltedPeer>
    typealias Event = TransferEvent<SaltedContent, SaltedPeer>

    struct PeerModel {
        var latency: ClosedRange<UInt64>
        var dropRate: Double
        var corruptRate: Double
        var holdings: [String: TransferHoldings]
        var isUp = false
    }

    enum Happening {
        case answer(peer: Int, content: String, chunk: Int)
        case holdings(peer: Int, content: String)
        case connect(Int)
        case disconnect(Int)
        case storePaused, storeResumed
    }

    let salt: UInt64
    var rng: TransferCoreRandom
    let configuration: TransferConfiguration
    var core: Core
    var now: UInt64 = 0
    var peers: [Int: PeerModel] = [:]
    var layouts: [String: TransferLayout] = [:]
    /// Chunks the store holds verified, per content: what the driver told the core.
    var store: [String: TransferChunkSet] = [:]
    var initiallyVerified: [String: UInt64] = [:]
    /// Per peer, requests asked and neither answered nor cancelled.
    var outstanding: [Int: Set<Pair>] = [:]
    var queue: [(time: UInt64, order: Int, happening: Happening)] = []
    var order = 0
    /// Every action, as text: what two runs compare.
    var log: [String] = []
    var lastProgress: [String: UInt64] = [:]
    var completed: Set<String> = []
    var failed: [String] = []
    var penalized: Set<Int> = []
    /// `.verified` events the driver sent for chunks already verified, while the download ran.
    var duplicatesSent = 0
    var violations: [String] = []

    struct Pair: Hashable {
        var content: String
        var chunk: Int
    }

    init(seed: UInt64, salt: UInt64) {
        self.salt = salt
        self.rng = TransferCoreRandom(seed: seed)
        var configuration = TransferConfiguration()
        configuration.initialWindow = 2
        configuration.maxWindow = 6
        configuration.maxRequestsInFlight = 16
        configuration.requestTimeoutMilliseconds = 800
        configuration.endgameThreshold = 6
        configuration.maxBadChunksPerPeer = 3
        self.configuration = configuration
        self.core = Core(configuration: configuration)

        layouts["a"] = TransferLayout(totalByteCount: 299_321, chunkByteCount: 1_000)
        layouts["b"] = TransferLayout(chunkByteCounts: (0..<80).map { _ in UInt32.random(in: 1...5_000, using: &rng) })
        store["a"] = TransferChunkSet(chunkCount: 300)
        store["b"] = TransferChunkSet(chunkCount: 80, chunks: (0..<80).filter { _ in rng.chance(0.5) })
        for id in 1...6 {
            let low = UInt64.random(in: 5...100, using: &rng)
            peers[id] = PeerModel(
                latency: low...(low + UInt64.random(in: 0...400, using: &rng)),
                dropRate: id == 2 ? 0.1 : 0.02, corruptRate: id == 4 ? 0.5 : 0,
                holdings: ["a": .all, "b": .all])
        }
        peers[5]!.holdings["a"] = .chunks(TransferChunkSet(chunkCount: 300, chunks: (0..<300).filter { _ in rng.chance(0.5) }))
        peers[6]!.holdings["b"] = nil
        for id in 1...6 { schedule(.connect(id), at: UInt64.random(in: 0...1_000, using: &rng)) }
        schedule(.disconnect(3), at: 1_300)
        schedule(.connect(3), at: 2_500)
        schedule(.storePaused, at: 1_000)
        schedule(.storeResumed, at: 1_600)
    }

    mutating func schedule(_ happening: Happening, at time: UInt64) {
        order += 1
        let index = queue.firstIndex { ($0.time, $0.order) > (time, order) } ?? queue.count
        queue.insert((time, order, happening), at: index)
    }

    func content(_ name: String) -> SaltedContent { SaltedContent(name: name, salt: salt) }
    func peer(_ id: Int) -> SaltedPeer { SaltedPeer(id: id, salt: salt) }

    /// Runs until both downloads end (or a virtual ten minutes pass).
    mutating func run() {
        for name in ["a", "b"] {
            initiallyVerified[name] = layouts[name]!.byteCount(of: store[name]!)
            handle(.wanted(content(name), layouts[name]!, verified: store[name]!))
        }
        while completed.count + failed.count < 2 && now < 600_000 {
            now += 50
            while let first = queue.first, first.time <= now {
                queue.removeFirst()
                happen(first.happening)
            }
            handle(.tick(nowMilliseconds: now))
        }
    }

    private mutating func happen(_ happening: Happening) {
        switch happening {
        case .answer(let id, let name, let chunk):
            guard peers[id]!.isUp else { return }
            outstanding[id]?.remove(Pair(content: name, chunk: chunk))
            if !peers[id]!.holdings[name, default: .chunks(TransferChunkSet(chunkCount: layouts[name]!.chunkCount))].contains(chunk) {
                handle(.notHeld(peer(id), content(name), chunk: chunk))
            } else if rng.chance(peers[id]!.corruptRate) {
                handle(.corrupt(peer(id), content(name), chunk: chunk))
            } else {
                if !completed.contains(name), !store[name]!.insert(chunk) { duplicatesSent += 1 }
                handle(.verified(peer(id), content(name), chunk: chunk))
            }
        case .holdings(let id, let name):
            guard peers[id]!.isUp else { return }
            let holdings = peers[id]!.holdings[name] ?? .chunks(TransferChunkSet(chunkCount: layouts[name]!.chunkCount))
            handle(.holdings(peer(id), content(name), holdings))
        case .connect(let id):
            guard !peers[id]!.isUp else { return }
            peers[id]!.isUp = true
            handle(.connected(peer(id)))
        case .disconnect(let id):
            guard peers[id]!.isUp else { return }
            peers[id]!.isUp = false
            outstanding[id] = nil
            queue.removeAll { if case .answer(id, _, _) = $0.happening { true } else { false } }
            handle(.disconnected(peer(id)))
        case .storePaused:
            handle(.storePaused)
        case .storeResumed:
            handle(.storeResumed)
        }
    }

    private mutating func latency(_ id: Int) -> UInt64 { UInt64.random(in: peers[id]!.latency, using: &rng) }

    private mutating func handle(_ event: Event) {
        for action in core.handle(event) {
            log.append("\(now) \(action)")
            carryOut(action)
        }
        check()
    }

    private mutating func carryOut(_ action: Core.Action) {
        switch action {
        case .ask(let peer, let content):
            schedule(.holdings(peer: peer.id, content: content.name), at: now + latency(peer.id))
        case .request(let peer, let content, let chunks):
            if penalized.contains(peer.id) { violations.append("\(now): asked penalized \(peer) for \(chunks)") }
            for chunk in chunks {
                if store[content.name]!.contains(chunk) { violations.append("\(now): asked for verified \(content) \(chunk)") }
                if outstanding[peer.id, default: []].insert(Pair(content: content.name, chunk: chunk)).inserted == false {
                    violations.append("\(now): asked \(peer) twice for \(content) \(chunk)")
                }
                if !rng.chance(peers[peer.id]!.dropRate) {
                    schedule(.answer(peer: peer.id, content: content.name, chunk: chunk), at: now + latency(peer.id))
                }
            }
        case .cancel(let peer, let content, let chunks):
            for chunk in chunks {
                outstanding[peer.id]?.remove(Pair(content: content.name, chunk: chunk))
                // Half the cancelled answers are on their way already and arrive all the same.
                if let index = queue.firstIndex(where: {
                    if case .answer(peer.id, content.name, chunk) = $0.happening { true } else { false }
                }), rng.chance(0.5) {
                    queue.remove(at: index)
                }
            }
        case .progress(let content, let verified, let total):
            if verified < lastProgress[content.name, default: 0] { violations.append("\(now): progress of \(content) went back") }
            if verified > total { violations.append("\(now): progress of \(content) past the total") }
            lastProgress[content.name] = verified
        case .completed(let content):
            completed.insert(content.name)
        case .failed(let content, _):
            failed.append(content.name)
        case .penalize(let peer, _):
            penalized.insert(peer.id)
            schedule(.disconnect(peer.id), at: now + 1)
            schedule(.connect(peer.id), at: now + 3_000)  // it comes back, and must not be asked
        case .paused, .resumed:
            break
        }
    }

    /// The bounds hold after every event, and the core's requests in flight are the driver's.
    private mutating func check() {
        if core.requestsInFlight > configuration.maxRequestsInFlight {
            violations.append("\(now): \(core.requestsInFlight) in flight")
        }
        let total = outstanding.values.reduce(0) { $0 + $1.count }
        if core.requestsInFlight != total { violations.append("\(now): core has \(core.requestsInFlight) in flight, driver \(total)") }
        for id in 1...6 {
            let count = core.requestsInFlight(to: peer(id))
            if count > configuration.maxWindow { violations.append("\(now): \(count) in flight at p\(id)") }
            if count != outstanding[id]?.count ?? 0 { violations.append("\(now): p\(id) has \(count), driver \(outstanding[id]?.count ?? 0)") }
            if let window = core.window(of: peer(id)), window < configuration.minWindow || window > configuration.maxWindow {
                violations.append("\(now): window \(window) at p\(id)")
            }
        }
    }
}

@Suite("TransferCore: seeded simulation")
struct TransferCoreSimulationTests {
    @Test("Downloads complete through losses, latencies, a corrupting peer, a departure and a full store", arguments: [1, 2, 3, 22, 1_234] as [UInt64])
    func simulation(seed: UInt64) {
        var simulation = TransferCoreSimulation(seed: seed, salt: 1)
        simulation.run()
        #expect(simulation.violations.isEmpty, "\(simulation.violations.prefix(5))")
        #expect(simulation.completed == ["a", "b"] && simulation.failed.isEmpty)
        for name in ["a", "b"] {
            #expect(simulation.lastProgress[name] == simulation.layouts[name]!.totalByteCount)
            #expect(simulation.store[name]!.isFull)
        }
        // Every chunk verified counted once: those the store lacked at the start.
        let missing = 300 + (80 - TransferCoreSimulation(seed: seed, salt: 1).store["b"]!.count)
        #expect(simulation.core.statistics.chunksVerified == missing)
        #expect(simulation.core.statistics.duplicateChunks == simulation.duplicatesSent)
        #expect(simulation.penalized == [4])
        #expect(simulation.log.contains { $0.hasPrefix("1000 paused(a, \(TransferPauseReason.storeFull))") })
        #expect(simulation.core.statistics.corruptChunks >= 3)
        #expect(simulation.core.requestsInFlight == 0 && simulation.core.contents.isEmpty)
    }

    @Test("The same events give the same actions, however the core's tables hash", arguments: [7, 99] as [UInt64])
    func deterministic(seed: UInt64) {
        var first = TransferCoreSimulation(seed: seed, salt: 1)
        var second = TransferCoreSimulation(seed: seed, salt: 0xDEAD_BEEF)
        first.run()
        second.run()
        #expect(first.log.count > 100)
        #expect(first.log == second.log)
    }
}
