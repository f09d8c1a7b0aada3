import ArgumentParser
import WeftControl
import WeftModel
import WeftNode

struct PeersCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers",
        abstract: "List connected peers: user identifier, display name, address, how found, what each is known to hold."
    )

    @OptionGroup var options: NodeOptions

    func execute() async throws {
        let (peers, people) = try await options.withNode { node in
            guard case .peers(let peers) = try await node.request(.peers) else { throw ControlClientError.unexpectedResponse("PEERS") }
            return (peers, try await node.people(showIdentifiers: options.ids))
        }
        if options.json { return try printJSON(peers.map(\.json)) }
        for peer in peers {
            let holds = peer.holdings.map { "holds \($0.conversations) conversations, \($0.operations) operations" } ?? "holdings unknown"
            say("\(people.name(peer.user))  \(peer.address)  \(peer.origin)  \(holds)")
        }
    }
}
