import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct WaitCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait until a conversation or message exists on this node, or with --node until the node answers (exit 0), or the timeout passes (exit 1)."
    )

    @OptionGroup var options: NodeOptions
    @Argument(help: "A conversation or message identifier (hex or weft:/// URL).") var identifier: String?

    @Flag(help: "Wait until a node runs on the home and answers its control socket (for scripts that start one).")
    var node = false

    @Option(help: "Seconds to wait, at most 86400.")
    var timeout: Double = 60

    func validate() throws {
        guard timeout >= 0, timeout <= 86400 else { throw ValidationError("--timeout must be from 0 to 86400 seconds.") }
        guard node == (identifier == nil) else { throw ValidationError("Give an identifier to wait for, or --node, not both.") }
    }

    func execute() async throws {
        if node { return try await waitForNode() }
        guard let identifier else { return }
        guard let object = parseObject(identifier) else {
            throw CLIError("\"\(identifier)\" is not a conversation or message identifier (hex, or a weft:/// URL).")
        }
        let found = try await options.withNode { node in
            guard case .found(let found) = try await node.request(.wait(object, timeoutMilliseconds: UInt32(timeout * 1000))) else {
                throw ControlClientError.unexpectedResponse("WAIT")
            }
            return found
        }
        switch found {
        case .conversation(let id): if options.json { try printJSON(["conversation": id.hex]) } else { say(id.hex) }
        case .message(let id): if options.json { try printJSON(["message": id.hex]) } else { say(id.hex) }
        }
    }

    /// Asks the home's node for its status until it answers: a node still starting has no
    /// socket yet, or one that does not answer yet.
    private func waitForNode() async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        let socket = options.home.nodeHome.controlSocket.path
        while true {
            let answered = (try? await ControlClient.withConnection(socketPath: socket) { node in
                if case .status = try await node.request(.status) { true } else { false }
            }) ?? false
            if answered {
                if options.json { try printJSON(["node": "ready"]) } else { say("ready") }
                return
            }
            guard ContinuousClock.now < deadline else {
                throw CLIError("No node answered on \(options.home.nodeHome.directory.path) within \(timeout) seconds.")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
