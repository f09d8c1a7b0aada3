import Foundation
import Synchronization
import WeftControl
import WeftCrypto
import WeftModel
import WeftNode

extension LocalMesh {
    /// One node of a local mesh: its home, its user, its `weft node` process when running, and
    /// a client for its control socket (one connection per request).
    public final class Node: Sendable {
        /// The node's index in `LocalMesh.nodes`.
        public let index: Int
        /// The display name given at `weft init`.
        public let name: String
        /// The node's home directory (identity, mesh key, store, control socket).
        public let home: URL
        /// The node's user (its identity's public key).
        public let user: UserID
        /// Where the node's standard output and error go, across restarts.
        public let logFile: URL

        private struct State {
            var process: NodeProcess?
            /// The listening port, fixed by the first start so neighbours can redial it.
            var port = 0
        }
        private let state = Mutex(State())

        init(index: Int, name: String, home: URL, user: UserID, logFile: URL) {
            self.index = index
            self.name = name
            self.home = home
            self.user = user
            self.logFile = logFile
        }

        /// The control socket's path.
        public var socketPath: String { home.appendingPathComponent(ControlConstants.socketFileName).path }

        /// Whether the node's process runs.
        public var isRunning: Bool { state.withLock { $0.process?.isRunning ?? false } }

        /// The process identifier of the node's process while it runs.
        public var processIdentifier: Int32? { state.withLock { $0.process?.isRunning == true ? $0.process?.identifier : nil } }

        /// The node process's resident memory in bytes (VmRSS in /proc), nil if it does not run.
        public var residentBytes: Int? {
            guard let pid = processIdentifier,
                let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
                let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
            else { return nil }
            return kilobytes * 1024
        }

        /// The address the node listens on, `127.0.0.1:PORT` (kept across restarts); nil
        /// before the first start.
        public var address: PeerAddress? { state.withLock { $0.port == 0 ? nil : PeerAddress(host: "127.0.0.1", port: $0.port) } }

        // MARK: - Requests

        /// Sends one request over a new control connection and returns its response; an
        /// ERROR response throws its `ControlFailure`, its message naming this node (in a mesh
        /// of several, "There is no conversation …" alone does not say where).
        public func request(_ request: ControlRequest) async throws -> ControlResponse {
            do {
                return try await ControlClient.withConnection(socketPath: socketPath) { try await $0.request(request) }
            } catch let failure as ControlFailure {
                throw ControlFailure(failure.code, "Node \(name): \(failure.message)")
            }
        }

        public func status() async throws -> NodeStatus {
            guard case .status(let status) = try await request(.status) else { throw unexpected("STATUS") }
            return status
        }

        /// The authenticated connections.
        public func peers() async throws -> [PeerRecord] {
            guard case .peers(let peers) = try await request(.peers) else { throw unexpected("PEERS") }
            return peers
        }

        /// The replication counters (`operationsReceived`, `duplicatesReceived`, ...).
        public func statistics() async throws -> [ReplicationCounter] {
            guard case .statistics(let counters) = try await request(.statistics) else { throw unexpected("STATISTICS") }
            return counters
        }

        /// Creates (or, distinct, finds) a conversation with `participants` (this node's user
        /// is implicit). It reaches other nodes with its first message unless `announce`.
        public func createConversation(
            with participants: [UserID], distinct: Bool = true, announce: Bool = false, metadata: [String: String] = [:]
        ) async throws -> ConversationRecord {
            let create = ControlRequest.CreateConversation(participants: participants, distinct: distinct, announce: announce, metadata: metadata)
            guard case .conversation(let record) = try await request(.createConversation(create)) else { throw unexpected("CREATE CONVERSATION") }
            return record
        }

        public func addParticipants(_ users: [UserID], to conversation: ConversationID) async throws {
            _ = try await request(.addParticipants(users, to: conversation))
        }

        public func removeParticipants(_ users: [UserID], from conversation: ConversationID) async throws {
            _ = try await request(.removeParticipants(users, from: conversation))
        }

        /// Every conversation this node shows (those its user is or was a participant of),
        /// oldest first, over as many pages as it takes.
        public func conversations() async throws -> [ConversationRecord] {
            var all: [ConversationRecord] = []
            while true {
                guard case .conversations(let total, let page) = try await request(.conversations(offset: UInt32(all.count))) else {
                    throw unexpected("CONVERSATIONS")
                }
                all += page
                if page.isEmpty || all.count >= total { return all }
            }
        }

        /// The conversation (the canonical one, if it was merged into another).
        public func conversation(_ id: ConversationID) async throws -> ConversationRecord {
            guard case .conversation(let record) = try await request(.conversation(id)) else { throw unexpected("CONVERSATION") }
            return record
        }

        /// Sends a text message; returns its identifier once stored (it goes out later).
        @discardableResult
        public func send(_ text: String, in conversation: ConversationID) async throws -> OperationID {
            try await send([ControlRequest.Part(mimeType: "text/plain", data: Array(text.utf8))], in: conversation)
        }

        @discardableResult
        /// Sends the file at `path` (read by the node itself: over 2 KB it is rich content).
        public func sendFile(_ path: String, mimeType: String = "application/octet-stream", in conversation: ConversationID) async throws -> OperationID {
            guard case .sent(let id) = try await request(.sendFiles([.init(mimeType: mimeType, source: .file(path))], in: conversation)) else {
                throw LocalMeshError("Node \(name): SEND FILES was not answered with SENT")
            }
            return id
        }

        public func send(_ parts: [ControlRequest.Part], in conversation: ConversationID) async throws -> OperationID {
            guard case .sent(let id) = try await request(.send(parts, in: conversation)) else { throw unexpected("SEND") }
            return id
        }

        /// Waits until this node shows `message` (in `conversation`) at `status` or beyond for
        /// each of `recipients` (every recipient when nil): delivered, say, or read. A recipient
        /// whose status failed throws at once, as the deadline does.
        public func waitUntil(
            _ message: OperationID, in conversation: ConversationID, reaches status: DeliveryStatus,
            for recipients: Set<UserID>? = nil, timeout: Duration = .seconds(30)
        ) async throws {
            let deadline = ContinuousClock.now + timeout
            var seen: [MessageRecord.Recipient] = []
            while true {
                if let record = try await messages(in: conversation).first(where: { $0.id == message }) {
                    seen = record.recipients.filter { recipients?.contains($0.user) ?? true }
                    if let failed = seen.first(where: { $0.status == .failed }) {
                        throw LocalMeshError("Node \(name): message \(message.hex) failed for \(failed.user): \(failed.reason)")
                    }
                    if !seen.isEmpty, seen.allSatisfy({ $0.status >= status }),
                        recipients.map({ Set(seen.map(\.user)) == $0 }) ?? true
                    {
                        return
                    }
                }
                guard ContinuousClock.now < deadline else {
                    let statuses = seen.map { "\($0.user): \($0.status)" }.joined(separator: ", ")
                    throw LocalMeshError(
                        "Node \(name): message \(message.hex) did not reach \(status) within \(timeout) (\(statuses.isEmpty ? "not shown" : statuses)).\(logTail(logFile, lines: 8))")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        /// Every message of the conversation, by position, over as many pages as it takes.
        public func messages(in conversation: ConversationID) async throws -> [MessageRecord] {
            var all: [MessageRecord] = []
            while true {
                guard case .messages(let total, let page) = try await request(.messages(conversation, offset: UInt32(all.count))) else {
                    throw unexpected("MESSAGES")
                }
                all += page
                if page.isEmpty || all.count >= total { return all }
            }
        }

        public func markRead(_ message: OperationID) async throws { _ = try await request(.markRead(message)) }

        public func markAllRead(in conversation: ConversationID) async throws { _ = try await request(.markAllRead(conversation)) }

        /// Waits on the node until the object exists there; returns it (for a merged
        /// conversation, the one it was merged into). Throws `ControlFailure` (timed out).
        @discardableResult
        public func wait(for object: ControlObjectID, timeout: Duration) async throws -> ControlObjectID {
            let milliseconds = UInt32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            guard case .found(let found) = try await request(.wait(object, timeoutMilliseconds: milliseconds)) else { throw unexpected("WAIT") }
            return found
        }

        /// Dials `address` and keeps dialing it.
        public func connect(to address: PeerAddress) async throws { _ = try await request(.connect(address: "\(address)")) }

        /// Cuts this node's side of the link to `peer` (see `LocalMesh.cut` for both sides).
        public func cut(_ peer: UserID) async throws { _ = try await request(.cut(peer)) }

        /// Heals this node's side of the link to `peer`.
        public func heal(_ peer: UserID) async throws { _ = try await request(.heal(peer)) }

        private func unexpected(_ what: String) -> LocalMeshError {
            LocalMeshError("Node \(name) answered \(what) with an unexpected response.")
        }

        // MARK: - The process

        /// Starts `weft node` listening on the node's port (a free one the first time) and
        /// dialing `peers`; returns once it answers STATUS with its listening address.
        func launch(binary: URL, peers: [String], extraArguments: [String], timeout: Duration) async throws {
            let port = state.withLock { $0.port }
            var arguments = ["node", "--home", home.path, "--listen", "127.0.0.1:\(port)", "--discovery", "off", "--log-level", "info"]
            for peer in peers { arguments += ["--peer", peer] }
            let process = try NodeProcess(binary: binary, arguments: arguments + extraArguments, log: logFile)
            state.withLock { $0.process = process }
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let exit = process.exit {
                    throw LocalMeshError("Node \(name) \(exit) while starting.\(logTail(logFile))")
                }
                // A stale socket left by a killed node refuses connections: STATUS succeeds
                // only once this process serves, and names the address once it listens.
                if let status = try? await status(), let bound = PeerAddress(status.listenAddress) {
                    state.withLock { $0.port = bound.port }
                    return
                }
                try await Task.sleep(for: .milliseconds(25))
            }
            process.signal(SIGKILL)
            throw LocalMeshError("Node \(name) did not answer on its control socket within \(timeout).\(logTail(logFile))")
        }

        /// SIGTERM, then waits for a graceful exit with status 0.
        func stop(timeout: Duration) async throws {
            guard let process = state.withLock({ $0.process }) else { return }
            process.signal(SIGTERM)
            guard let exit = await process.waitForExit(timeout: timeout) else {
                process.signal(SIGKILL)
                _ = await process.waitForExit(timeout: timeout)
                throw LocalMeshError("Node \(name) did not stop within \(timeout) of SIGTERM (killed).\(logTail(logFile))")
            }
            guard exit == .status(0) else {
                throw LocalMeshError("Node \(name) \(exit) after SIGTERM, not 0.\(logTail(logFile))")
            }
        }

        /// SIGKILL (no chance to clean up, as in a crash), then waits until the process is gone.
        func kill(timeout: Duration) async throws {
            guard let process = state.withLock({ $0.process }) else { return }
            process.signal(SIGKILL)
            guard await process.waitForExit(timeout: timeout) != nil else {
                throw LocalMeshError("Node \(name) (pid \(process.identifier)) was still running \(timeout) after SIGKILL.")
            }
        }

        /// SIGKILL without waiting: the last resort of `deinit`.
        func killNow() { state.withLock { $0.process }?.signal(SIGKILL) }
    }
}
