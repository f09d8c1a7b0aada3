import Foundation
import NIOCore
import NIOPosix
import WeftControl
import WeftModel

/// Talks to a running node over its control socket (SPEC.md §15): the CLI and LocalMesh use
/// it. One request at a time per connection, or a pipelined list of them
/// (`ControlConnection.requests`); a WATCH takes its connection for good.
public enum ControlClient {
    /// Connects to the socket at `socketPath`, runs `body` with the connection, and closes it.
    /// - Throws: `ControlClientError.noNode` when nothing listens there.
    public static func withConnection<R: Sendable>(
        socketPath: String, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        _ body: (ControlConnection) async throws -> R
    ) async throws -> R {
        let channel: NIOAsyncChannel<ControlFrame, ControlFrame>
        do {
            channel = try await ClientBootstrap(group: group).connect(unixDomainSocketPath: socketPath) { channel in
                channel.eventLoop.makeCompletedFuture { try channel.controlAsyncChannel() }
            }
        } catch let error as IOError where [ENOENT, ECONNREFUSED, ENOTSOCK].contains(error.errnoCode) {
            throw ControlClientError.noNode(socketPath)
        } catch {
            throw ControlClientError.cannotConnect(socketPath, "\(error)")
        }
        return try await channel.executeThenClose { inbound, outbound in
            try await body(ControlConnection(inbound: inbound.makeAsyncIterator(), outbound: outbound))
        }
    }
}

/// An open control connection. Not for sharing between tasks: one call at a time.
public final class ControlConnection {
    private var inbound: NIOAsyncChannelInboundStream<ControlFrame>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ControlFrame>
    private var nextID: UInt32 = 1

    init(inbound: NIOAsyncChannelInboundStream<ControlFrame>.AsyncIterator, outbound: NIOAsyncChannelOutboundWriter<ControlFrame>) {
        self.inbound = inbound
        self.outbound = outbound
    }

    /// Sends a request and returns its response; an ERROR response throws its `ControlFailure`.
    /// (Not for WATCH: use `watch`.)
    public func request(_ request: ControlRequest) async throws -> ControlResponse {
        switch request {
        case .watch: preconditionFailure("use watch(_:) for WATCH")
        case .download: preconditionFailure("use download(_:part:to:_:) for DOWNLOAD")
        default: break
        }
        guard request.encodedByteCount <= ControlConstants.lengthByteCount + ControlConstants.maxFrameByteCount else {
            throw ControlFailure(.tooLarge,
                "The request is \(request.encodedByteCount) bytes; a control frame holds at most \(ControlConstants.maxFrameByteCount).")
        }
        let id = try await send(request)
        let response = try await next(for: id)
        if case .error(let failure) = response { throw failure }
        return response
    }

    /// Sends `requests` pipelined, with up to `window` of them in flight (the node answers at
    /// most `ControlConstants.maxRequestsInFlight` at once and stops reading past that), and
    /// returns their responses in the order of the requests, ERROR responses among them.
    /// Requests go out a few at a time as answers come back, so a busy client pays a write
    /// and a read per handful of requests rather than per request. (Not for WATCH.)
    public func requests(_ requests: [ControlRequest], window: Int = ControlConstants.maxRequestsInFlight) async throws -> [ControlResponse] {
        precondition(!requests.contains { if case .watch = $0 { true } else { false } }, "use watch(_:) for WATCH")
        precondition(window > 0, "a window holds at least one request")
        for request in requests where request.encodedByteCount > ControlConstants.lengthByteCount + ControlConstants.maxFrameByteCount {
            throw ControlFailure(.tooLarge,
                "A request is \(request.encodedByteCount) bytes; a control frame holds at most \(ControlConstants.maxFrameByteCount).")
        }
        var responses = [ControlResponse?](repeating: nil, count: requests.count)
        var inFlight: [UInt32: Int] = [:]
        var nextToSend = 0
        var received = 0
        while received < requests.count {
            // Refill once half the window came back, in one write.
            if inFlight.count <= window / 2, nextToSend < requests.count {
                var frames: [ControlFrame] = []
                while inFlight.count < window, nextToSend < requests.count {
                    let id = nextID
                    nextID = nextID == UInt32.max ? 1 : nextID + 1
                    frames.append(requests[nextToSend].frame(requestID: id))
                    inFlight[id] = nextToSend
                    nextToSend += 1
                }
                try await outbound.write(contentsOf: frames)
            }
            guard let frame = try await inbound.next() else { throw ControlClientError.closed }
            let response = try ControlResponse(frame: frame)
            if frame.requestID == 0, case .error(let failure) = response { throw failure }
            guard let index = inFlight.removeValue(forKey: frame.requestID) else { continue }
            responses[index] = response
            received += 1
        }
        return responses.map { $0! }
    }

    /// Starts a WATCH, calls `started` once the node streams (every change from then on is
    /// seen), and hands each event to `body` until it returns false or the task is cancelled.
    /// A node that closes the connection meanwhile (it stopped, or died) throws
    /// `ControlClientError.stoppedWatching`: a watcher must not mistake that for an end.
    /// With `messages`, each new message's record follows the event of its creation.
    public func watch(messages: Bool = false, started: () -> Void = {}, _ body: (ControlEvent) async throws -> Bool) async throws {
        let id = try await send(.watch(messages: messages))
        guard case .watching = try await next(for: id) else { throw ControlClientError.unexpectedResponse("WATCH") }
        started()
        while true {
            let response: ControlResponse
            do {
                response = try await next(for: id)
            } catch ControlClientError.closed {
                throw ControlClientError.stoppedWatching
            }
            switch response {
            case .event(let event): if try await !body(event) { return }
            case .error(let failure): throw failure
            default: throw ControlClientError.unexpectedResponse("WATCH")
            }
        }
    }

    /// Asks the node for part `part` of `message` (copied to `path` unless empty) and hands
    /// each PROGRESS to `body` until the node says DONE; an ERROR throws its failure. A node
    /// that closes the connection meanwhile throws `ControlClientError.closed`.
    public func download(_ message: OperationID, part: UInt16, to path: String, _ body: (DownloadProgress) async throws -> Void) async throws {
        let id = try await send(.download(message, part: part, path: path))
        while true {
            switch try await next(for: id) {
            case .progress(let progress): try await body(progress)
            case .done: return
            case .error(let failure): throw failure
            default: throw ControlClientError.unexpectedResponse("DOWNLOAD")
            }
        }
    }

    private func send(_ request: ControlRequest) async throws -> UInt32 {
        let id = nextID
        nextID = nextID == UInt32.max ? 1 : nextID + 1
        try await outbound.write(request.frame(requestID: id))
        return id
    }

    /// The next frame for request `id`; an ERROR about the connection (id 0) throws.
    private func next(for id: UInt32) async throws -> ControlResponse {
        while true {
            guard let frame = try await inbound.next() else { throw ControlClientError.closed }
            let response = try ControlResponse(frame: frame)
            if frame.requestID == id { return response }
            if frame.requestID == 0, case .error(let failure) = response { throw failure }
        }
    }
}

/// Why the client could not talk to a node, in one sentence.
public enum ControlClientError: Error, CustomStringConvertible, Sendable, Equatable {
    /// No node listens on the socket (no file, or a stale one).
    case noNode(String)
    case cannotConnect(String, String)
    /// The node closed the connection before answering.
    case closed
    /// The node closed the connection while it streamed events (WATCH).
    case stoppedWatching
    case unexpectedResponse(String)

    public var description: String {
        switch self {
        case .noNode(let path): "No node is listening on \(path)."
        case .cannotConnect(let path, let why): "Cannot connect to \(path): \(why)."
        case .closed: "The node closed the control connection before answering."
        case .stoppedWatching: "The node stopped: its control connection closed while watching."
        case .unexpectedResponse(let what): "The node answered \(what) with something else."
        }
    }
}
