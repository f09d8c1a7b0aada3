import ArgumentParser
import Foundation
import WeftControl
import WeftModel
import WeftNode

/// Options of every command that talks to a running node: its home, and JSON output.
struct NodeOptions: ParsableArguments {
    @OptionGroup var home: HomeOptions

    @Flag(help: "Print JSON (field names in the README) instead of text.")
    var json = false

    @Flag(help: "In text, show users by their full identifier (with the name beside it) instead of by name.")
    var ids = false

    /// Runs `body` on a connection to the home's running node. Every failure becomes one
    /// sentence: no node running, or the node's own refusal.
    func withNode<R: Sendable>(_ body: (ControlConnection) async throws -> R) async throws -> R {
        let nodeHome = home.nodeHome
        do {
            return try await ControlClient.withConnection(socketPath: nodeHome.controlSocket.path, body)
        } catch ControlClientError.noNode {
            let path = nodeHome.directory.path
            guard nodeHome.exists else {
                throw CLIError("\(path) holds no Weft identity, so no node runs there; create one with `weft init --home \(path)`, then start it with `weft node --home \(path)`")
            }
            throw CLIError("no node is running on \(path); start one with `weft node --home \(path)`")
        } catch let failure as ControlFailure {
            throw CLIError(failure.message)
        } catch let error as ControlClientError {
            throw CLIError(error.description)
        }
    }
}

extension ControlConnection {
    /// Every page of the node's conversations.
    func allConversations() async throws -> [ConversationRecord] {
        var records: [ConversationRecord] = []
        while true {
            guard case .conversations(let total, let page) = try await request(.conversations(offset: UInt32(records.count))) else {
                throw ControlClientError.unexpectedResponse("CONVERSATIONS")
            }
            records += page
            if page.isEmpty || records.count >= Int(total) { return records }
        }
    }

    /// Every page of a conversation's messages.
    func allMessages(in conversation: ConversationID) async throws -> [MessageRecord] {
        var records: [MessageRecord] = []
        while true {
            guard case .messages(let total, let page) = try await request(.messages(conversation, offset: UInt32(records.count))) else {
                throw ControlClientError.unexpectedResponse("MESSAGES")
            }
            records += page
            if page.isEmpty || records.count >= Int(total) { return records }
        }
    }

    func conversation(_ id: ConversationID) async throws -> ConversationRecord {
        guard case .conversation(let record) = try await request(.conversation(id)) else {
            throw ControlClientError.unexpectedResponse("CONVERSATION")
        }
        return record
    }

    func users() async throws -> [KnownUser] {
        guard case .users(let users) = try await request(.users) else { throw ControlClientError.unexpectedResponse("USERS") }
        return users
    }

    /// A request answered with DONE.
    func perform(_ request: ControlRequest) async throws {
        guard case .done = try await self.request(request) else { throw ControlClientError.unexpectedResponse("\(request.kind)") }
    }
}
