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
        #expect(try String(contentsOfFile: "\(bob.home)/peers", encoding: .utf8) == "\(alice.address)\n")
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
}
