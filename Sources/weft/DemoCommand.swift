import ArgumentParser
import Foundation
import Logging
import NIOCore
import WeftCrypto
import WeftNode
import WeftStore
import WeftWire

/// Weft's main job, small: nodes on loopback in temporary homes, showing their secure channel.
struct DemoCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Start two nodes on loopback in temporary homes and show their secure channel."
    )

    @Option(help: "Log level for the nodes' own log lines (on standard error).")
    var logLevel: Logger.Level = .error

    @Option(help: "Seconds the whole demo may take before it gives up.")
    var timeout: Int = 30

    func execute() async throws {
        bootstrapLogging(level: logLevel)
        // Every wait below ends when this task group cancels the demo at the deadline.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await runDemo() }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))
                throw CLIError("The demo did not finish within \(timeout) s.")
            }
            try await group.next()
            group.cancelAll()
        }
    }

    private func runDemo() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("weft-demo-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }

        say("Weft demo: two nodes on loopback, each in a temporary home under \(root.path)")
        let meshKey = MeshKey.generate()
        let alice = try makeNode("alice", root: root, meshKey: meshKey, peers: [])
        var aliceEvents = alice.events.makeAsyncIterator()
        try await whileRunning(alice) {
            let aliceAddress = try await next(&aliceEvents, "alice's listener") { event -> SocketAddress? in
                if case .listening(let address) = event { return address } else { return nil }
            }
            let listenAddress = PeerAddress(host: aliceAddress.ipAddress ?? "127.0.0.1", port: aliceAddress.port ?? 0)
            say("  alice  \(alice.identity)  listening on \(listenAddress)")

            let bob = try makeNode("bob", root: root, meshKey: meshKey, peers: [listenAddress])
            var bobEvents = bob.events.makeAsyncIterator()
            say("  bob    \(bob.identity)  dialing alice")
            try await whileRunning(bob) {
                try await showChannel(alice: alice, aliceEvents: &aliceEvents, bob: bob, bobEvents: &bobEvents)

                // A node holding another mesh key cannot join.
                let mallory = try makeNode("mallory", root: root, meshKey: MeshKey.generate(), peers: [listenAddress])
                var malloryEvents = mallory.events.makeAsyncIterator()
                let (refusal, malloryView) = try await whileRunning(mallory) {
                    let refusal = try await next(&aliceEvents, "the outsider's attempt") { event -> ConnectionEnd? in
                        if case .connectionEnded(nil, _, let end) = event { return end } else { return nil }
                    }
                    let malloryView = try await next(&malloryEvents, "the outsider's view") { event -> ConnectionEnd? in
                        if case .connectionEnded(_, _, let end) = event { return end } else { return nil }
                    }
                    return (refusal, malloryView)
                }
                say("A third node with a different mesh key tries to join alice:")
                say("  alice:   \(refusal)")
                say("  mallory: \(malloryView)")
            }
            // Bob stopped: alice hears his CLOSE(shutting down).
            let bobsClose = try await next(&aliceEvents, "bob's goodbye") { event -> ConnectionEnd? in
                if case .connectionEnded(_?, _, let end) = event { return end } else { return nil }
            }
            say("Bob stops; alice: \(bobsClose)")
        }
        say("Both nodes stopped; temporary homes removed.")
    }

    private func showChannel(
        alice: MeshNode, aliceEvents: inout NodeEvents.AsyncIterator, bob: MeshNode, bobEvents: inout NodeEvents.AsyncIterator
    ) async throws {
        let seenByBob = try await next(&bobEvents, "bob's handshake") { event -> NodeInfo? in
            if case .peerAuthenticated(let info, _, _) = event { return info } else { return nil }
        }
        let seenByAlice = try await next(&aliceEvents, "alice's handshake") { event -> NodeInfo? in
            if case .peerAuthenticated(let info, _, _) = event { return info } else { return nil }
        }
        say("Handshake (\(WireConstants.noiseProtocolName), mesh key as PSK):")
        say("  bob   authenticated \(seenByBob.displayName) as \(seenByBob.identity)")
        say("  alice authenticated \(seenByAlice.displayName) as \(seenByAlice.identity)")
        guard seenByBob.identity == alice.identity, seenByAlice.identity == bob.identity else {
            throw CLIError("A node authenticated the wrong identity.")
        }

        try await bob.send(ByteBuffer(string: "hello from bob"), to: alice.identity)
        let toAlice = try await next(&aliceEvents, "bob's message") { event -> String? in
            if case .data(_, let bytes) = event { return String(buffer: bytes) } else { return nil }
        }
        try await alice.send(ByteBuffer(string: "hello from alice"), to: bob.identity)
        let toBob = try await next(&bobEvents, "alice's message") { event -> String? in
            if case .data(_, let bytes) = event { return String(buffer: bytes) } else { return nil }
        }
        say("Encrypted DATA frames (ChaCha20-Poly1305):")
        say("  bob -> alice: \"\(toAlice)\"")
        say("  alice -> bob: \"\(toBob)\"")

        let roundTrip = try await next(&bobEvents, "a keepalive ping") { event -> TimeAmount? in
            if case .pong(_, let roundTrip) = event { return roundTrip } else { return nil }
        }
        say("Keepalive: ping round trip \(String(format: "%.2f", Double(roundTrip.nanoseconds) / 1e6)) ms")
    }

    /// Runs `node` while `body` runs, then stops it (CLOSE(shutting down) to its peers) and
    /// waits until it has stopped.
    private func whileRunning<R: Sendable>(_ node: MeshNode, _ body: () async throws -> R) async throws -> R {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await node.run() }
            let result: R
            do {
                result = try await body()
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
            try await group.waitForAll()
            return result
        }
    }

    /// A node in its own temporary home, created the way `weft init --no-passphrase` does.
    private func makeNode(_ name: String, root: URL, meshKey: MeshKey, peers: [PeerAddress]) throws -> MeshNode {
        let home = NodeHome(directory: root.appendingPathComponent(name))
        let identity = try home.create(displayName: name, meshKey: meshKey, protection: .none)
        return MeshNode(
            configuration: .init(
                identity: identity, meshKey: meshKey, displayName: name, peers: peers,
                policy: ChannelPolicy(pingInterval: .milliseconds(500)), tickInterval: .milliseconds(100)),
            store: try openStore(home, localUser: identity.publicKey),
            logger: Logger(label: "weft.\(name)"))
    }

    /// The first event `match` accepts; throws if the stream ends (or the demo is cancelled) first.
    private func next<T: Sendable>(
        _ events: inout NodeEvents.AsyncIterator, _ what: String, _ match: (NodeEvent) -> T?
    ) async throws -> T {
        while let event = await events.next() {
            if let value = match(event) { return value }
        }
        throw CLIError("The demo gave up waiting for \(what).")
    }
}
