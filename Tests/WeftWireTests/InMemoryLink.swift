import NIOCore
import Testing
import WeftCrypto
@testable import WeftWire

/// Two `ConnectionStateMachine`s joined by an in-memory stand-in for a TCP connection, with a
/// clock the test moves by hand. Writes from one side are queued toward the other and delivered
/// by `run()` (all at once, or `chunkSize` bytes per `receive`) until nothing moves. When a side
/// ends (its `.close` action), its queued writes are still delivered, then the peer is told the
/// connection closed, as a socket would.
struct InMemoryLink {
    enum Side: Hashable, Sendable, CaseIterable, CustomStringConvertible {
        case initiator, responder
        var other: Side { self == .initiator ? .responder : .initiator }
        var description: String { self == .initiator ? "initiator" : "responder" }
    }

    static let displayNames: [Side: String] = [.initiator: "alice", .responder: "bob"]

    private(set) var initiator: ConnectionStateMachine
    private(set) var responder: ConnectionStateMachine
    let configurations: [Side: ConnectionStateMachine.Configuration]
    private(set) var now: NIODeadline

    /// Every action except `.write` that each side produced, in order.
    private(set) var actions: [Side: [ConnectionAction]] = [.initiator: [], .responder: []]
    /// Each `.write` a side produced, in order.
    private(set) var writes: [Side: [ByteBuffer]] = [.initiator: [], .responder: []]
    /// How each side ended: its own `.close` action, or what `connectionClosed()` returned.
    private(set) var ends: [Side: ConnectionEnd] = [:]
    /// Bytes delivered toward each side so far: the stream offset `corruptions` refers to.
    private(set) var delivered: [Side: Int] = [.initiator: 0, .responder: 0]
    /// Stream offsets (counted in bytes travelling toward a side) whose byte is XORed with the
    /// mask on the way.
    var corruptions: [Side: [Int: UInt8]] = [:]
    /// Bytes per `receive` call; nil delivers everything queued at once.
    var chunkSize: Int?

    private var inFlight: [Side: [UInt8]] = [.initiator: [], .responder: []]
    private var connected: [Side: Bool] = [.initiator: true, .responder: true]

    init(
        policy: ChannelPolicy = .default, meshKey: MeshKey = .generate(), responderMeshKey: MeshKey? = nil,
        start: NIODeadline = .uptimeNanoseconds(1_000_000_000_000)
    ) {
        self.init(
            initiator: ConnectionStateMachine.Configuration(
                identity: .generate(), meshKey: meshKey, displayName: Self.displayNames[.initiator]!, policy: policy),
            responder: ConnectionStateMachine.Configuration(
                identity: .generate(), meshKey: responderMeshKey ?? meshKey, displayName: Self.displayNames[.responder]!,
                policy: policy),
            start: start)
    }

    /// A link between machines configured by the caller (fixed identities, seeded randomness).
    init(
        initiator initiatorConfiguration: ConnectionStateMachine.Configuration,
        responder responderConfiguration: ConnectionStateMachine.Configuration,
        start: NIODeadline = .uptimeNanoseconds(1_000_000_000_000)
    ) {
        configurations = [.initiator: initiatorConfiguration, .responder: responderConfiguration]
        initiator = ConnectionStateMachine(role: .initiator, configuration: initiatorConfiguration)
        responder = ConnectionStateMachine(role: .responder, configuration: responderConfiguration)
        now = start
    }

    subscript(side: Side) -> ConnectionStateMachine { side == .initiator ? initiator : responder }

    /// What `side` should learn about its peer.
    func expectedInfo(of side: Side) -> NodeInfo {
        NodeInfo(identity: configurations[side]!.identity.publicKey, displayName: Self.displayNames[side]!)
    }

    // MARK: - Driving

    mutating func advance(by amount: TimeAmount) { now = now + amount }

    /// Both sides connect and send their preambles.
    mutating func start() {
        for side in Side.allCases { apply(withMachine(side) { [now] in $0.start(now: now) }, from: side) }
    }

    /// Starts, runs to quiet, and checks both sides are established.
    mutating func establish(sourceLocation: SourceLocation = #_sourceLocation) {
        start()
        run()
        #expect(initiator.isEstablished && responder.isEstablished, "handshake failed: \(ends)", sourceLocation: sourceLocation)
    }

    /// Delivers queued bytes in both directions until nothing is left to deliver.
    mutating func run() {
        var rounds = 0
        while deliverOnce() {
            rounds += 1
            if rounds > 1_000_000 {
                Issue.record("the link never went quiet")
                return
            }
        }
    }

    /// Delivers everything queued toward `side` (in `chunkSize` pieces), and nothing else.
    mutating func deliver(to side: Side) {
        while !inFlight[side]!.isEmpty { deliverChunk(to: side) }
    }

    /// Hands `bytes` to `side` as if they came from the peer, bypassing the queue.
    mutating func inject(_ bytes: [UInt8], to side: Side) {
        apply(withMachine(side) { [now] in $0.receive(ByteBuffer(bytes: bytes), now: now) }, from: side)
    }

    /// Returns how many bytes the side wrote for this event.
    @discardableResult
    mutating func send(_ text: String, from side: Side) -> Int {
        apply(withMachine(side) { [now] in $0.send(data: ByteBuffer(string: text), now: now) }, from: side)
    }

    @discardableResult
    mutating func tick(_ side: Side) -> Int {
        apply(withMachine(side) { [now] in $0.tick(now: now) }, from: side)
    }

    @discardableResult
    mutating func close(_ side: Side, _ code: CloseCode, reason: String) -> Int {
        apply(withMachine(side) { [now] in $0.close(code, reason: reason, now: now) }, from: side)
    }

    // MARK: - Looking at what happened

    func authenticated(_ side: Side) -> [NodeInfo] {
        actions[side]!.compactMap { if case .authenticated(let info) = $0 { info } else { nil } }
    }

    func received(_ side: Side) -> [String] {
        actions[side]!.compactMap { if case .data(let bytes) = $0 { String(buffer: bytes) } else { nil } }
    }

    func pongs(_ side: Side) -> [TimeAmount] {
        actions[side]!.compactMap { if case .pong(let roundTrip) = $0 { roundTrip } else { nil } }
    }

    /// The `.close` actions a side's machine produced (at most one is expected).
    func closes(_ side: Side) -> [ConnectionEnd] {
        actions[side]!.compactMap { if case .close(let end) = $0 { end } else { nil } }
    }

    // MARK: - Plumbing

    private mutating func withMachine<R>(_ side: Side, _ body: (inout ConnectionStateMachine) -> R) -> R {
        switch side {
        case .initiator: body(&initiator)
        case .responder: body(&responder)
        }
    }

    /// Records actions; returns the number of bytes written.
    @discardableResult
    private mutating func apply(_ newActions: [ConnectionAction], from side: Side) -> Int {
        var written = 0
        for (index, action) in newActions.enumerated() {
            switch action {
            case .write(let buffer):
                #expect(connected[side]!, "\(side) wrote after it closed")
                writes[side]!.append(buffer)
                inFlight[side.other]! += buffer.readableBytesView
                written += buffer.readableBytes
            case .close(let end):
                #expect(index == newActions.count - 1, "\(side): .close is the last action")
                #expect(ends[side] == nil, "\(side) ended twice: \(String(describing: ends[side])), then \(end)")
                actions[side]!.append(action)
                ends[side] = end
                connected[side] = false
            case .authenticated, .data, .pong:
                actions[side]!.append(action)
            }
        }
        return written
    }

    private mutating func deliverChunk(to side: Side) {
        guard connected[side]! else {
            inFlight[side] = []  // the socket is gone
            return
        }
        let count = min(chunkSize ?? .max, inFlight[side]!.count)
        var chunk = Array(inFlight[side]!.prefix(count))
        inFlight[side]!.removeFirst(count)
        let start = delivered[side]!
        for (offset, mask) in corruptions[side] ?? [:] where (start..<(start + count)).contains(offset) {
            chunk[offset - start] ^= mask
        }
        delivered[side]! += count
        apply(withMachine(side) { [now] in $0.receive(ByteBuffer(bytes: chunk), now: now) }, from: side)
    }

    /// One delivery, or one hang-up; false when the link is quiet.
    private mutating func deliverOnce() -> Bool {
        // Alternate directions so byte-at-a-time runs interleave the two streams.
        var progressed = false
        for side in [Side.responder, .initiator] where !inFlight[side]!.isEmpty {
            deliverChunk(to: side)
            progressed = true
        }
        if progressed { return true }
        for side in Side.allCases where connected[side]! && !connected[side.other]! {
            connected[side] = false
            if let end = withMachine(side, { $0.connectionClosed() }) { ends[side] = end }
            return true
        }
        return false
    }
}
