import Foundation
import Testing

/// SPEC.md §13.3 meeting a relay: nothing posted after a removal goes to the removed user's
/// node, so on the line alice–bob–carol, once bob is removed from alice and carol's
/// conversation, alice's next message has no way to carol. It must say so, be counted, and
/// fail with that reason when its time to live runs out. Real processes.
@Suite("a message withheld from the only relay explains itself", .serialized, .timeLimit(.minutes(3)))
struct WithheldRelayTests {
    @Test("pending with a reason, counted by conv show, and failed with the reason at the end of its time to live")
    func waitsWithAReason() async throws {
        let dir = try TemporaryDirectory()
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        let carol = try await RunningNode(dir, "carol", meshKeyFrom: alice)
        try await alice.start(["--ttl", "6"])
        try await bob.start(["--peer", alice.address])
        try await carol.start(["--peer", bob.address])
        defer {
            for node in [alice, bob, carol] { node.process?.terminate() }
        }
        let (bobID, carolID) = (try await bob.userID(), try await carol.userID())
        let conversation = try await alice.ok("conv new", arguments: ["--non-distinct", "--announce", carolID])
        _ = try await alice.ok("conv add", arguments: [conversation, bobID])
        _ = try await alice.ok("conv remove", arguments: [conversation, bobID])
        try await eventually("carol sees bob removed") {
            // Not there until the creation arrives: refused meanwhile.
            let shown = try? await carol.run(["conv", "show", "--json"], [conversation])
            guard shown?.status == 0, let data = shown?.stdout.data(using: .utf8),
                let record = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { return false }
            return Set(record["participants"] as? [String] ?? []) == [try await alice.userID(), carolID]
        }
        let message = try await alice.ok("send", arguments: [conversation, "--text", "only for carol"])

        func carolsEntry() async throws -> [String: Any]? {
            let messages = try #require(try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]])
            let record = messages.first { $0["id"] as? String == message }
            return (record?["recipients"] as? [[String: Any]])?.first { $0["user"] as? String == carolID }
        }
        var reason = ""
        try await eventually("the pending message says why it waits", seconds: 5) {
            let entry = try await carolsEntry()
            reason = entry?["reason"] as? String ?? ""
            return entry?["status"] as? String == "pending" && reason.hasPrefix("waiting: ")
        }
        #expect(reason.contains("bob's node") && reason.contains("§13.3"), "\(reason)")
        let shown = try await alice.ok("conv show", arguments: [conversation])
        #expect(shown.contains("your messages not sent yet: 1\n  \(reason)"), "\(shown)")
        let counted = try #require(try await alice.json("conv show", arguments: [conversation]) as? [String: Any])
        #expect(counted["waitingMessages"] as? Int == 1)
        #expect(counted["waitingReasons"] as? [String] == [reason])

        try await eventually("the message fails with the reason when its time to live runs out", seconds: 20) {
            let entry = try await carolsEntry()
            return entry?["status"] as? String == "failed"
        }
        let failure = try await carolsEntry()?["reason"] as? String ?? ""
        #expect(failure.hasPrefix("expired: ") && failure.hasSuffix("; \(reason)"), "\(failure)")
        #expect(try await carol.run(["wait", message], ["--timeout", "1"]).status != 0, "the message never reached carol")
    }
}
