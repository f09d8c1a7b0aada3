import ArgumentParser
import Foundation
import Synchronization
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
        try await richContent(mesh, alice: alice, carol: carol, in: canonical)
    }

    /// A large part streams from alice to carol through bob as verified chunks; carol's node is
    /// killed part way and restarted, and the download resumes from what it had verified.
    private func richContent(_ mesh: DemoMesh, alice: DemoNode, carol: DemoNode, in conversation: ConversationID) async throws {
        let size = 48 << 20
        var bytes = [UInt8](repeating: 0, count: size)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for index in 0..<(size / 2) {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes[index] = UInt8(truncatingIfNeeded: state >> 33)
        }
        let text = Array((0..<(size / 20)).map { "line \($0) of a long report\n" }.joined().utf8)
        bytes.replaceSubrange((size / 2)..., with: text.prefix(size - size / 2))
        let file = mesh.root.appendingPathComponent("report.bin")
        try Data(bytes).write(to: file)
        let message = try await alice.sendFile(file.path, mimeType: "application/octet-stream", in: conversation)
        say("Alice sends a 48 MiB file (half random, half text) as rich content: the message carries only its descriptor; the bytes go as verified chunks, relayed by bob.")
        _ = try await carol.waitForMessage(message)
        let received = mesh.root.appendingPathComponent("received.bin")
        let bar = ProgressBar(enabled: true, output: STDOUT_FILENO)
        let third = UInt64(size / 3)
        let whole = try await carol.download(message, to: received.path) { progress in
            bar.show(progress)
            return progress.verifiedBytes < third
        }
        bar.finish()
        var restarted = carol
        if whole {
            say("  carol has it all before the demo could interrupt her node.")
        } else {
            restarted = try await mesh.killAndRestart(carol)
            say("  carol's node is killed (SIGKILL) a third of the way through, and started again on its home:")
            let resumedFrom = Mutex<UInt64?>(nil)
            _ = try await restarted.download(message, to: received.path) { progress in
                resumedFrom.withLock { $0 = $0 ?? progress.verifiedBytes }
                bar.show(progress)
                return true
            }
            bar.finish()
            say("  the download resumed from the \(ProgressBar.bytes(resumedFrom.withLock { $0 } ?? 0)) carol's node had verified before it was killed.")
        }
        let same = try Data(contentsOf: received) == Data(bytes)
        say(same ? "  carol's copy is byte for byte alice's file." : "  carol's copy differs from alice's file (it should not).")
        if !same { throw CLIError("The file carol received differs from the one alice sent.") }
    }
}
