import Foundation
import Logging
import NIOCore
import NIOPosix
import WeftControl

/// Serves the control protocol (SPEC.md §15) on a Unix domain socket: one task per connection,
/// one per request in flight (at most `ControlConstants.maxRequestsInFlight` per connection),
/// each WATCH streaming events until its connection closes. A malformed frame gets one ERROR and
/// closes that connection only.
public struct ControlServer: Sendable {
    public let socketPath: String
    private let handler: any ControlHandler
    private let logger: Logger
    private let group: any EventLoopGroup

    public init(
        socketPath: String, handler: any ControlHandler, logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.socketPath = socketPath
        self.handler = handler
        self.logger = logger
        self.group = group
    }

    /// Binds the socket, makes it mode 0600, and serves it while `body` runs; when `body`
    /// returns (or throws, or the task is cancelled) it closes every connection, removes the
    /// socket file and returns `body`'s result. An existing file at the path is removed first:
    /// the caller holds the home's lock, so no running node owns it.
    public func serve<R: Sendable>(while body: @Sendable () async throws -> R) async throws -> R {
        unlink(socketPath)
        let listener: NIOAsyncChannel<NIOAsyncChannel<ControlFrame, ControlFrame>, Never>
        do {
            listener = try await ServerBootstrap(group: group)
                .bind(unixDomainSocketPath: socketPath) { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.controlAsyncChannel() }
                }
        } catch {
            throw ControlServerError("Cannot serve the control socket \(socketPath): \(error).")
        }
        defer { unlink(socketPath) }
        // The home is 0700 already; the socket itself is for its user alone too.
        guard chmod(socketPath, 0o600) == 0 else {
            try? await listener.channel.close()
            throw ControlServerError("Cannot make the control socket \(socketPath) private: \(String(cString: strerror(errno))).")
        }
        return try await withThrowingTaskGroup(of: R?.self) { group in
            group.addTask {
                try await listener.executeThenClose { connections in
                    try await withThrowingDiscardingTaskGroup { connectionGroup in
                        for try await connection in connections {
                            connectionGroup.addTask { await self.serve(connection) }
                        }
                    }
                }
                return nil
            }
            let result = try await body()
            group.cancelAll()
            while let _ = try? await group.next() {}
            return result
        }
    }

    // MARK: - One connection

    private func serve(_ connection: NIOAsyncChannel<ControlFrame, ControlFrame>) async {
        do {
            try await connection.executeThenClose { inbound, outbound in
                let slots = RequestSlots(ControlConstants.maxRequestsInFlight)
                try await withThrowingDiscardingTaskGroup { requests in
                    do {
                        for try await frame in inbound {
                            let request: ControlRequest
                            do throws(ControlFailure) {
                                request = try ControlRequest(frame: frame)
                            } catch {
                                try await refuse(error, requestID: frame.requestID, outbound)
                                break
                            }
                            await slots.acquire()
                            requests.addTask {
                                await self.answer(request, id: frame.requestID, outbound)
                                await slots.release()
                            }
                        }
                    } catch let failure as ControlFailure {
                        try await refuse(failure, requestID: 0, outbound)
                    }
                    // The client left, or broke the protocol: stop its requests and watches.
                    requests.cancelAll()
                }
            }
        } catch {
            logger.debug("control connection ended: \(error)")
        }
    }

    private func refuse(
        _ failure: ControlFailure, requestID: UInt32, _ outbound: NIOAsyncChannelOutboundWriter<ControlFrame>
    ) async throws {
        logger.notice("control connection closed: \(failure.message)")
        try await outbound.write(ControlResponse.error(failure).frame(requestID: requestID))
    }

    private func answer(_ request: ControlRequest, id: UInt32, _ outbound: NIOAsyncChannelOutboundWriter<ControlFrame>) async {
        do {
            if case .download(let message, let part, let path) = request {
                // PROGRESS frames while it comes, then DONE; or ERROR with why it cannot.
                let outcome: ControlResponse
                do {
                    try await handler.download(message, part: Int(part), to: path) { progress in
                        try await outbound.write(ControlResponse.progress(progress).frame(requestID: id))
                    }
                    outcome = .done
                } catch let failure as ControlFailure {
                    outcome = .error(failure)
                }
                try await outbound.write(outcome.frame(requestID: id))
                return
            }
            if case .watch(let messages) = request {
                try await outbound.write(ControlResponse.watching.frame(requestID: id))
                try await handler.watch(messages: messages) { event in
                    try await outbound.write(ControlResponse.event(event).frame(requestID: id))
                }
                return
            }
            var response = await handler.respond(to: request)
            if response.body.readableBytes > ControlConstants.maxFrameByteCount - ControlConstants.headerByteCount {
                // Pages are cut to fit; a single record or list that does not is refused.
                response = .error(ControlFailure(.tooLarge, "The answer to this request does not fit one control frame."))
            }
            try await outbound.write(response.frame(requestID: id))
        } catch {
            // The connection closed under the request, or the request was cancelled with it.
            logger.debug("control request \(id) ended: \(error)")
        }
    }
}

/// Why the control socket cannot be served, in one sentence.
public struct ControlServerError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Counts a connection's requests in flight; `acquire` waits while all slots are taken, so a
/// client that floods requests stops being read (TCP-like back-pressure on the socket).
actor RequestSlots {
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { free = count }

    func acquire() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
