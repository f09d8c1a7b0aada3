import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct WatchCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print one line per change and delivery event until interrupted (JSON lines with --json)."
    )

    @OptionGroup var options: NodeOptions

    func execute() async throws {
        try await options.withNode { node in
            let people = try await node.people(showIdentifiers: options.ids)
            try await node.watch(started: { warn("watching the node on \(options.home.nodeHome.directory.path); one line per event") }) { event in
                if options.json { try printJSON(event.json) } else { say(event.text(people)) }
                return true
            }
        }
    }
}
