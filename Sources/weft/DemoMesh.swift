import Foundation
import Synchronization
import WeftControl
import WeftCrypto
import WeftModel
import WeftNode

/// The demo's nodes: `weft node` child processes, each on its own home, talked to through its
/// control socket.
final class DemoMesh: Sendable {
    let root: URL
    private let started = Mutex<[DemoNode]>([])

    init(root: URL) { self.root = root }

    var nodes: [DemoNode] { started.withLock { $0 } }

    /// Creates a home (as `weft init --new-mesh --no-passphrase` would) and starts its node,
    /// waiting until it listens.
    func start(_ name: String, meshKey: MeshKey, peers: [String] = []) async throws -> DemoNode {
        let home = NodeHome(directory: root.appendingPathComponent(name))
        let identity = try home.create(displayName: name, meshKey: meshKey, protection: .none)
        return try await run(name, home: home, user: identity.publicKey, peers: peers)
    }

    /// Kills `node` with SIGKILL (no goodbye, as a crash) and starts it again on its home; it
    /// dials the peers its home remembers. Returns the new node in its place.
    func killAndRestart(_ node: DemoNode) async throws -> DemoNode {
        kill(node.process.processIdentifier, SIGKILL)
        node.process.waitUntilExit()
        started.withLock { $0.removeAll { $0 === node } }
        try? FileManager.default.removeItem(at: node.home.addressFile)
        return try await run(node.name, home: node.home, user: node.user, peers: [])
    }

    private func run(_ name: String, home: NodeHome, user: UserID, peers: [String]) async throws -> DemoNode {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.executablePath())
        process.arguments = ["node", "--home", home.directory.path, "--listen", "127.0.0.1:0", "--discovery", "off", "--log-level", "error"]
            + peers.flatMap { ["--peer", $0] }
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let node = DemoNode(name: name, home: home, user: user, process: process)
        started.withLock { $0.append(node) }
        node.address = try await node.waitForAddress()
        return node
    }

    /// SIGTERM to every node, waits for each to exit, and removes the homes. Returns the
    /// names of nodes that did not exit with status 0.
    @discardableResult
    func stopAll(removingHomes: Bool) -> [String] {
        for node in nodes where node.process.isRunning { node.process.terminate() }
        for node in nodes { node.process.waitUntilExit() }
        if removingHomes { try? FileManager.default.removeItem(at: root) }
        return nodes.filter { $0.process.terminationStatus != 0 }.map(\.name)
    }

    private static func executablePath() throws -> String {
        let path = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        return path
    }
}

/// One node of the demo.
final class DemoNode: @unchecked Sendable {
    // @unchecked: `address` is written once, by `DemoMesh.start`, before the node is shared.
    let name: String
    let home: NodeHome
    let user: UserID
    let process: Process
    var address = ""

    init(name: String, home: NodeHome, user: UserID, process: Process) {
        self.name = name
        self.home = home
        self.user = user
        self.process = process
    }

    func waitForAddress() async throws -> String {
        while true {
            if let text = try? String(contentsOf: home.addressFile, encoding: .utf8), !text.isEmpty {
                return text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            guard process.isRunning else { throw CLIError("\(name)'s node exited before it listened.") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func request(_ request: ControlRequest) async throws -> ControlResponse {
        try await ControlClient.withConnection(socketPath: home.controlSocket.path) { try await $0.request(request) }
    }

    /// An announced distinct conversation with `other`: it replicates at once.
    func createConversation(with other: UserID) async throws -> ConversationID {
        let response = try await request(.createConversation(.init(participants: [other], distinct: true, announce: true, metadata: [:])))
        guard case .conversation(let record) = response else { throw CLIError("\(name)'s node answered \(response).") }
        return record.id
    }

    /// Waits until `conversation` exists here and returns the conversation it resolves to.
    func waitMerged(_ conversation: ConversationID) async throws -> ConversationID {
        let response = try await request(.wait(.conversation(conversation), timeoutMilliseconds: 30_000))
        guard case .found(.conversation(let canonical)) = response else { throw CLIError("\(name) never saw \(conversation.hex).") }
        return canonical
    }

    func send(_ text: String, in conversation: ConversationID) async throws -> OperationID {
        let response = try await request(.send([.init(mimeType: "text/plain", data: Array(text.utf8))], in: conversation))
        guard case .sent(let id) = response else { throw CLIError("\(name)'s node answered \(response).") }
        return id
    }

    func waitForMessage(_ message: OperationID) async throws -> String {
        _ = try await request(.wait(.message(message), timeoutMilliseconds: 30_000))
        let record = try await self.message(message)
        return String(decoding: record?.parts.first?.inlineData ?? [], as: UTF8.self)
    }

    func message(_ id: OperationID) async throws -> MessageRecord? {
        let found = try await request(.wait(.message(id), timeoutMilliseconds: 30_000))
        guard case .found = found else { return nil }
        // The message's conversation: read its page of messages.
        for conversation in try await conversations() {
            var offset: UInt32 = 0
            while true {
                guard case .messages(let total, let page) = try await request(.messages(conversation, offset: offset)) else { break }
                if let record = page.first(where: { $0.id == id }) { return record }
                offset += UInt32(page.count)
                if page.isEmpty || offset >= total { break }
            }
        }
        return nil
    }

    func conversations() async throws -> [ConversationID] {
        guard case .conversations(_, let page) = try await request(.conversations(offset: 0)) else { return [] }
        return page.map(\.id)
    }

    /// Polls until `recipient`'s status of `message` is at least `status`.
    func waitForStatus(of message: OperationID, recipient: UserID, _ status: DeliveryStatus) async throws {
        while true {
            if let record = try await self.message(message),
                let entry = record.recipients.first(where: { $0.user == recipient }),
                entry.status.rawValue >= status.rawValue, entry.status != .failed
            {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func markRead(_ message: OperationID) async throws { _ = try await request(.markRead(message)) }

    /// Sends the file at `path` (the node reads it: over 2 KB it is rich content).
    func sendFile(_ path: String, mimeType: String, in conversation: ConversationID) async throws -> OperationID {
        let response = try await request(.sendFiles([.init(mimeType: mimeType, source: .file(path))], in: conversation))
        guard case .sent(let id) = response else { throw CLIError("\(name)'s node answered \(response).") }
        return id
    }

    /// Downloads the first rich-content part of `message` to `path`, handing each progress to
    /// `body` until it returns false (the download goes on in the node) or the part is whole.
    /// Returns whether it is whole.
    func download(_ message: OperationID, to path: String, _ body: @escaping @Sendable (DownloadProgress) -> Bool) async throws -> Bool {
        do {
            try await ControlClient.withConnection(socketPath: home.controlSocket.path) { client in
                try await client.download(message, part: ControlConstants.defaultPart, to: path) { progress in
                    if !body(progress) { throw DownloadInterrupted() }
                }
            }
            return true
        } catch is DownloadInterrupted {
            return false
        }
    }

    func heldOperations() async throws -> UInt64 {
        guard case .status(let status) = try await request(.status) else { return 0 }
        return status.heldOperations ?? 0
    }
}

/// The demo stopped following a download (the download goes on in the node).
struct DownloadInterrupted: Error {}
