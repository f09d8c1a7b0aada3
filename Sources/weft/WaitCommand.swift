import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct WaitCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait until a conversation or message exists on this node (exit 0), or the timeout passes (exit 1)."
    )

    @OptionGroup var options: NodeOptions
    @Argument(help: "A conversation or message identifier (hex or weft:/// URL).") var identifier: String

    @Option(help: "Seconds to wait, at most 86400.")
    var timeout: Double = 60

    func validate() throws {
        guard timeout >= 0, timeout <= 86400 else { throw ValidationError("--timeout must be from 0 to 86400 seconds.") }
    }

    func execute() async throws {
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
}
