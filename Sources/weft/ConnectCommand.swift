import ArgumentParser
import WeftControl
import WeftNode

/// `weft connect HOST:PORT`: the running node dials a peer from now on, and after restarts.
struct ConnectCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Make the running node dial a peer and keep dialing it, also after a restart (its home remembers it)."
    )

    @OptionGroup var options: NodeOptions
    @Argument(help: "The peer's address, host:port.") var address: String

    func execute() async throws {
        try await options.withNode { node in try await node.perform(.connect(address: address)) }
        try report(["connected": address], "dialing \(address) (and after restarts)", json: options.json)
    }
}

/// `weft disconnect HOST:PORT`: the running node stops dialing a peer and forgets it.
struct DisconnectCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "disconnect",
        abstract: "Make the running node stop dialing a peer, close the connection with it, and forget it."
    )

    @OptionGroup var options: NodeOptions
    @Argument(help: "The peer's address, host:port, as given to connect (or --peer).") var address: String

    func execute() async throws {
        try await options.withNode { node in try await node.perform(.disconnect(address: address)) }
        try report(["disconnected": address], "no longer dialing \(address)", json: options.json)
    }
}
