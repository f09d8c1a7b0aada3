import ArgumentParser
import Foundation
import WeftControl
import WeftCrypto
import WeftModel
import WeftNode

/// Weft's main job, small: three `weft node` processes on loopback in temporary homes, driven
/// through their control sockets as the CLI drives them, telling what happens in plain words.
struct DemoCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run three nodes on loopback in temporary homes: a merge, a relayed message, delivered and read."
    )

    @Flag(help: "Leave the nodes running at the end and print the commands to talk to them.")
    var keep = false

    @Option(help: "Seconds the whole demo may take before it gives up.")
    var timeout: Int = 60

    func execute() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("weft-demo-\(UUID().uuidString.prefix(8))")
        let mesh = DemoMesh(root: root)
        var kept = false
        defer { if !kept { mesh.stopAll(removingHomes: true) } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await runDemo(mesh) }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout))
                throw CLIError("The demo did not finish within \(timeout) s.")
            }
            try await group.next()
            group.cancelAll()
        }
        if keep {
            kept = true
            say("")
            say("The nodes keep running. Talk to them with the CLI, for example:")
            // This very binary, so the commands work as printed wherever `weft` is not on PATH.
            let weft = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
            for node in mesh.nodes {
                say("  \(weft) conv ls --home \(node.home.directory.path)")
            }
            say("  \(weft) send CONV --text hello --home \(mesh.nodes[0].home.directory.path)")
            say("Stop them with: kill \(mesh.nodes.map { String($0.process.processIdentifier) }.joined(separator: " ")) && rm -r \(root.path)")
        } else {
            let failed = mesh.stopAll(removingHomes: true)
            kept = true  // stopped already
            guard failed.isEmpty else { throw CLIError("\(failed.joined(separator: ", ")) did not stop cleanly.") }
            say("All three nodes stopped cleanly (SIGTERM, exit 0); their homes are removed.")
        }
    }

    private func runDemo(_ mesh: DemoMesh) async throws {
        say("Weft demo: three nodes on loopback, each a `weft node` process in a home under \(mesh.root.path)")
        let meshKey = MeshKey.generate()
        let alice = try await mesh.start("alice", meshKey: meshKey)
        let carol = try await mesh.start("carol", meshKey: meshKey)
        say("  alice  \(alice.user)  listening on \(alice.address)")
        say("  carol  \(carol.user)  listening on \(carol.address)")
        say("Alice and carol are not connected. Each starts a conversation with the other:")

        let fromAlice = try await alice.createConversation(with: carol.user)
        let fromCarol = try await carol.createConversation(with: alice.user)
        say("  alice's conversation \(fromAlice.hex)")
        say("  carol's conversation \(fromCarol.hex)  (two conversations for one pair of people)")

        let bob = try await mesh.start("bob", meshKey: meshKey, peers: [alice.address, carol.address])
        say("Bob starts and dials both: alice - bob - carol. Alice and carol never connect directly.")
        // Each waits for the other's conversation; then both resolve both to one.
        let canonical = try await alice.waitMerged(fromCarol)
        let views = [
            try await alice.waitMerged(fromAlice), try await carol.waitMerged(fromAlice), try await carol.waitMerged(fromCarol),
        ]
        guard views.allSatisfy({ $0 == canonical }) else {
            throw CLIError("The two conversations did not merge into the same one.")
        }
        say("They meet through bob, and the two conversations merge into \(canonical.hex) on both nodes (the earlier creation wins).")

        let message = try await alice.send("Hello carol, this goes through bob.", in: canonical)
        say("Alice sends a message \(message.hex.prefix(16))…")
        let text = try await carol.waitForMessage(message)
        say("  carol receives it, relayed by bob: \"\(text)\"")
        try await alice.waitForStatus(of: message, recipient: carol.user, .delivered)
        say("  alice sees it sent and delivered: carol's node acknowledged it")
        try await carol.markRead(message)
        try await alice.waitForStatus(of: message, recipient: carol.user, .read)
        say("  carol reads it; alice sees read")
        let relayed = try await bob.heldOperations()
        let shownByBob = try await bob.conversations().count
        say("Bob stores and relays all \(relayed) operations, though he takes part in neither conversation; his own API shows \(shownByBob == 0 ? "none of them" : "\(shownByBob) of them (it should show none)").")
    }
}
