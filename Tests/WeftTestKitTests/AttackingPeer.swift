import Foundation
import Logging
import NIOCore
import Synchronization
import Testing
import WeftCrypto
import WeftModel
import WeftNode
import WeftStore
import WeftSync
import WeftTestKit
import WeftWire

func now() -> HLCTimestamp { HLCTimestamp(milliseconds: UInt64(Date().timeIntervalSince1970 * 1000), counter: 0) }

/// An in-process `MeshNode` with the mesh's key and an identity of its own (an authenticated
/// member of the mesh), that sends sync messages of its choosing, may stop reading its socket,
/// and decodes what it receives through each connection's own compressed stream, so it sees
/// any piece of one connection's stream that lands on another.
final class AttackingPeer: Sendable {
    let identity: NodeIdentity
    let node: MeshNode
    private let directory: URL
    private let runner: Task<Void, any Error>
    private let events: Task<Void, Never>
    private let record = Record()

    /// What the events task saw.
    private final class Record: Sendable {
        let peers = Mutex(Set<PublicIdentity>())
        let ends = Mutex([PublicIdentity: ConnectionEnd]())
        /// Connections authenticated so far, and the current one per peer.
        let connections = Mutex([PublicIdentity: PeerConnection]())
        let authentications = Mutex(0)
        /// Messages decoded, and payloads that did not decode on their connection's stream.
        let received = Mutex([SyncMessage]())
        let undecodable = Mutex([String]())
        /// While set, the events task takes no event: the node stops reading its sockets.
        let paused = Mutex(false)
    }

    var user: UserID { identity.publicKey }

    /// - Parameter redial: how soon the attacker dials again after a connection ends.
    /// - Parameter features: the feature bits its node info sets (§3.3): with `.names`, it is
    ///   told NAMES.
    init(
        meshKeyFrom home: URL, dialing address: String, redial: TimeAmount = .milliseconds(250), features: NodeFeatures = []
    ) async throws {
        identity = NodeIdentity.generate()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("weft-attacker-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let store = try Store(directory: directory, localUser: identity.publicKey)
        let peer = try #require(PeerAddress(address))
        var configuration = MeshNode.Configuration(
            identity: identity, meshKey: try NodeHome(directory: home).meshKey(), displayName: "mallory", listenAddress: nil,
            peers: [peer], redialDelays: [redial])
        configuration.features = features
        node = MeshNode(configuration: configuration, store: store, logger: Logger(label: "attacker"))
        let node = node
        let record = record
        runner = Task { try await node.run() }
        events = Task {
            var streams: [PeerConnection: SyncStreamDecoder] = [:]
            for await event in node.events {
                while record.paused.withLock({ $0 }) {
                    try? await Task.sleep(for: .milliseconds(10))
                    if Task.isCancelled { return }
                }
                switch event {
                case .peerAuthenticated(let info, _, _, let connection):
                    streams[connection] = SyncStreamDecoder()
                    record.peers.withLock { _ = $0.insert(info.identity) }
                    record.connections.withLock { $0[info.identity] = connection }
                    record.authentications.withLock { $0 += 1 }
                case .connectionEnded(let info?, _, let end, let connection):
                    record.ends.withLock { $0[info.identity] = end }
                    if let connection { streams[connection] = nil }
                case .data(let connection, let payload):
                    guard let stream = streams[connection] else { continue }
                    do {
                        let message = try SyncMessage(payload: stream.decode(payload))
                        record.received.withLock { $0.append(message) }
                    } catch {
                        record.undecodable.withLock { $0.append("\(error)") }
                    }
                default: break
                }
            }
        }
    }

    func waitUntilConnected(to peer: PublicIdentity) async throws {
        try await waitFor("the attacking peer to connect") {
            record.peers.withLock { $0.contains(peer) } && node.connectedPeers.contains(peer)
        }
    }

    /// Polls `condition` every 20 ms until it holds, failing the test after `seconds` (`what`
    /// is read then, so it can say how far it got).
    func waitFor(_ what: @autoclosure () -> String, seconds: Double = 30, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while try await !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out after \(seconds) s waiting for \(what())")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func sign(_ operation: WeftModel.Operation) -> SignedOperation { SignedOperation(signing: operation, with: identity) }

    /// The operation (authored by someone else) with the attacker's signature over its
    /// identifier: well formed, but the author's key does not verify it.
    func forge(_ operation: WeftModel.Operation) throws -> SignedOperation {
        let encoding = operation.encoded()
        let id = try #require(OperationID(bytes: BLAKE2b.hash(encoding, outputByteCount: OperationID.byteCount)))  // §12.1
        let signature = identity.sign(Array("weft operation v1".utf8) + id.bytes)
        var wire = ByteBuffer()
        wire.writeInteger(UInt32(encoding.count))
        wire.writeBytes(encoding)
        wire.writeBytes(signature)
        return try SignedOperation(wireBytes: Array(wire.readableBytesView))
    }

    func send(_ message: SyncMessage, to peer: PublicIdentity) async throws {
        try await node.send(message.payload(), to: peer)
    }

    /// Sends a DATA payload of its choosing, sync message or not.
    func sendPayload(_ payload: [UInt8], to peer: PublicIdentity) async throws {
        try await node.send(ByteBuffer(bytes: payload), to: peer)
    }

    /// How the first connection with `peer` that ended, ended; nil while none has.
    func connectionEnd(with peer: PublicIdentity) -> ConnectionEnd? { record.ends.withLock { $0[peer] } }

    /// How the first connection with `peer` that ended, ended.
    func waitForConnectionEnd(with peer: PublicIdentity) async throws -> ConnectionEnd {
        var end: ConnectionEnd?
        try await waitFor("the connection with \(peer) to end") {
            end = record.ends.withLock { $0[peer] }
            return end != nil
        }
        return try #require(end)
    }

    /// Stops (true) or resumes (false) taking events: stopped, the node reads nothing more
    /// from its sockets once its inbound buffers fill, and TCP stops the sender.
    func pauseReading(_ paused: Bool) { record.paused.withLock { $0 = paused } }

    /// Connections that authenticated so far.
    var authentications: Int { record.authentications.withLock { $0 } }
    /// Every message decoded so far, over all connections.
    var received: [SyncMessage] { record.received.withLock { $0 } }
    /// Payloads that did not decode on the stream of the connection they came on.
    var undecodable: [String] { record.undecodable.withLock { $0 } }

    /// `count` of the attacker's operations, each in a conversation of its own, each second in
    /// its author's chain and caused by a made-up operation: pending wherever they arrive.
    func pendingOperations(_ count: Int, sequence: UInt64 = 2) -> [SignedOperation] {
        let cause = OperationID(bytes: Array(repeating: 7, count: OperationID.byteCount))!
        return (0..<count).map { _ in
            sign(WeftModel.Operation(
                author: user, conversation: .random(), sequence: sequence, timestamp: now(), causes: [cause],
                body: .postMessage(parts: [MessagePart(mimeType: "text/plain", data: Array("pending".utf8))], options: MessageOptions())))
        }
    }

    /// Pushes `operations` to `peer` in OPERATIONS of 1,500, calling `afterEach` after each.
    func push(_ operations: [SignedOperation], to peer: PublicIdentity, afterEach: () async throws -> Void = {}) async throws {
        for start in stride(from: 0, to: operations.count, by: 1_500) {
            let chunk = Array(operations[start..<min(start + 1_500, operations.count)])
            try await send(.operations(.init(isPush: true, operations: chunk)), to: peer)
            try await afterEach()
        }
    }

    /// Drops the connection with `peer` and waits until the attacker has dialed it again.
    func reconnect(to peer: PublicIdentity) async throws {
        let before = authentications
        await dropConnection(with: peer)
        try await waitFor("the attacker to reconnect") { authentications > before }
    }

    /// Stops reading and asks `peer` for the whole of `log`, 50 times every 50 ms, for
    /// `duration`, calling `sample` between rounds.
    func floodWants(for log: ConversationID, to peer: PublicIdentity, for duration: Duration, sample: () -> Void) async throws {
        pauseReading(true)
        let want = SyncMessage.want(.init(entries: [.init(conversation: log, beyond: VersionVector())]))
        let start = ContinuousClock.now
        while ContinuousClock.now - start < duration {
            for _ in 0..<50 { try await send(want, to: peer) }
            sample()
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Closes the current connection with `peer` at once, as a crashing peer would: no
    /// CLOSE frame, whatever is buffered dropped.
    func dropConnection(with peer: PublicIdentity) async {
        guard let connection = record.connections.withLock({ $0[peer] }) else { return }
        node.fail(connection, code: ErrorCode(rawValue: 1), reason: "gone")
    }

    func stop() {
        runner.cancel()
        events.cancel()
        try? FileManager.default.removeItem(at: directory)
    }
}
