import Foundation
import Testing

/// Peers managed at run time: `weft connect` and `weft disconnect`, remembered in the home
/// across restarts (SPEC.md §11, §15.4). Real `weft node` processes on loopback.
@Suite("peers at run time: connect, disconnect, remembered across restarts", .serialized, .timeLimit(.minutes(3)))
struct PeersAtRuntimeTests {
    static func peerUsers(_ node: RunningNode) async throws -> [String] {
        try #require(try await node.json("peers") as? [[String: Any]]).compactMap { $0["user"] as? String }
    }

    @Test("connect dials a peer and remembers it: after a restart the node dials it again; disconnect forgets it")
    func connectAndDisconnect() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start()
        try await bob.start()
        defer {
            alice.process?.terminate()
            bob.process?.terminate()
        }
        let aliceID = try await alice.userID()
        #expect(try await Self.peerUsers(bob).isEmpty)

        let connected = try #require(try await bob.json("connect", arguments: [alice.address]) as? [String: String])
        #expect(connected == ["connected": alice.address])
        try await eventually("bob connects to alice") { try await Self.peerUsers(bob) == [aliceID] }
        let origin = try #require(try await bob.json("peers") as? [[String: Any]]).first?["origin"] as? String
        #expect(origin == "added")
        // Once connected, the line names whose node answered there (the address it announced).
        #expect(try String(contentsOfFile: "\(bob.home)/peers", encoding: .utf8) == "\(alice.address) \(aliceID)\n")
        #expect(fileMode("\(bob.home)/peers") == 0o600)

        // Restarted without --peer: the home remembers alice.
        #expect(try await bob.stop() == 0)
        try await bob.start()
        try await eventually("bob dials alice again after a restart") { try await Self.peerUsers(bob) == [aliceID] }

        #expect(try await bob.ok("disconnect", arguments: [alice.address]) == "no longer dialing \(alice.address)")
        try await eventually("bob's link to alice closes") { try await Self.peerUsers(bob).isEmpty }
        // What a restart dials from: alice is no longer in it.
        #expect(try String(contentsOfFile: "\(bob.home)/peers", encoding: .utf8) == "")

        let bad = try await bob.run(["connect"], ["not-an-address"])
        #expect(bad.status == 1)
        #expect(bad.stderr == "weft: \"not-an-address\" is not host:port with a port from 0 to 65535.\n")
    }

    @Test("a relay restarted on a new port is found again: it dials where its peers last listened, tells its new port, and they dial it there after their own restarts")
    func relayOnNewPort() async throws {
        let dir = try TemporaryDirectory()
        let relay = try await RunningNode(dir, "relay")
        let alice = try await RunningNode(dir, "alice", meshKeyFrom: relay)
        let carol = try await RunningNode(dir, "carol", meshKeyFrom: relay)
        try await relay.start()
        let firstAddress = relay.address
        try await alice.start(["--peer", firstAddress])
        try await carol.start(["--peer", firstAddress])
        defer {
            for node in [relay, alice, carol] { node.process?.terminate() }
        }
        let relayID = try await relay.userID()
        let (aliceID, carolID) = (try await alice.userID(), try await carol.userID())
        try await eventually("alice and carol reach the relay") { try await Set(Self.peerUsers(relay)) == [aliceID, carolID] }
        // The relay remembers where each said it listens.
        let remembered = try String(contentsOfFile: "\(relay.home)/peers", encoding: .utf8)
        #expect(remembered.contains("\(alice.address) \(aliceID)\n") && remembered.contains("\(carol.address) \(carolID)\n"), "\(remembered)")

        // The relay comes back on another port: alice and carol cannot reach it where they
        // were told to; it dials them.
        #expect(try await relay.stop() == 0)
        try await relay.start()
        #expect(relay.address != firstAddress)
        try await eventually("the relay dials alice and carol again") { try await Set(Self.peerUsers(relay)) == [aliceID, carolID] }
        try await eventually("alice remembers the relay's new address") {
            (try? String(contentsOfFile: "\(alice.home)/peers", encoding: .utf8))?.contains("\(relay.address) \(relayID)\n") == true
        }

        // alice restarts on a new port too, with the old --peer: the relay cannot dial her;
        // she dials the relay where it last said it listens.
        #expect(try await alice.stop() == 0)
        try await alice.start(["--peer", firstAddress])
        try await eventually("alice dials the relay at its new address") {
            let peers = try #require(try await alice.json("peers") as? [[String: Any]])
            return peers.contains { $0["user"] as? String == relayID && $0["origin"] as? String != "inbound" }
        }

        // And the mesh works through the relay: carol's message reaches alice.
        let conversation = try await carol.ok("conv new", arguments: [aliceID])
        let message = try await carol.ok("send", arguments: [conversation, "--text", "found you"])
        #expect(try await alice.run(["wait", message], ["--timeout", "20"]).status == 0)
    }
}
