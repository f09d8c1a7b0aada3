import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct StatusCommand: AsyncCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Show the running node's state.")

    @OptionGroup var options: NodeOptions

    func execute() async throws {
        let status = try await options.withNode { node in
            guard case .status(let status) = try await node.request(.status) else { throw ControlClientError.unexpectedResponse("STATUS") }
            return status
        }
        if options.json { return try printJSON(status.json) }
        say("user: \(status.user)")
        say("name: \(status.displayName)")
        say("listening: \(status.listenAddress.isEmpty ? "no" : status.listenAddress)")
        say("started: \(timeText(milliseconds: status.startedAt))")
        say("connected peers: \(status.connectedPeers)")
        say("conversations: \(status.conversations)")
        say("unsent messages: \(status.unsentMessages)")
        say("time to live: \(status.timeToLiveSeconds) s")
        say("retention: \(status.retentionDays) days")
        say("replication: \(status.isReplicating ? "running" : "not running")")
        say("held operations: \(countText(status.heldOperations))")
        say("operations not yet synced: \(countText(status.unsyncedOperations))")
        let interfaces = status.discoveryInterfaces.isEmpty ? "no interface it can use" : status.discoveryInterfaces.joined(separator: ", ")
        say("LAN discovery: \(status.discovery ? "on, \(interfaces)" : "off")")
    }
}
