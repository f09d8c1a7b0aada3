import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct WatchCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print one line per change and delivery event until interrupted (JSON lines with --json).",
        discussion: "With --messages, print each new message instead (time, conversation, sender, text), as a chat client receives them."
    )

    @OptionGroup var options: NodeOptions

    @Flag(help: "Print each message as it arrives, with its sender and text, instead of every event.")
    var messages = false

    func execute() async throws {
        try await options.withNode { node in
            var people = try await node.people(showIdentifiers: options.ids)
            let what = messages ? "one line per new message" : "one line per event"
            try await node.watch(messages: messages, started: { warn("watching the node on \(options.home.nodeHome.directory.path); \(what)") }) { event in
                if messages {
                    guard case .newMessage(let record) = event else { return true }
                    // A sender met since the watch began (through a relay, say) is named too.
                    if !people.knows(record.sender) { people = try await node.people(showIdentifiers: options.ids) }
                }
                if options.json { try printJSON(event.json) } else { say(event.text(people)) }
                return true
            }
        }
    }
}
