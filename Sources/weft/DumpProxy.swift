import Foundation
import NIOCore
import NIOPosix
import Synchronization
import WeftDump
import WeftNode
import WeftWire

/// `weft dump --proxy LISTEN --to HOST:PORT`: accepts connections on LISTEN, dials HOST:PORT for
/// each, forwards the bytes both ways untouched and as they come, and decodes both directions
/// beside the forwarding (a decoder that waits for the key log never holds the traffic up).
struct DumpProxy {
    let listen: PeerAddress
    let target: PeerAddress
    let keyLog: LiveKeyLog
    let filter: DumpFilter
    let show: @Sendable ([DumpRecord]) -> Void

    func run() async throws {
        let listener: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
        do {
            listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: listen.host, port: listen.port) { channel in
                    channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
                }
        } catch {
            throw CLIError("Cannot listen on \(listen): \(error).")
        }
        let bound = listener.channel.localAddress?.displayForm ?? "\(listen)"
        warn("proxying \(bound) → \(target); decoding what passes")
        let numbers = Atomic<Int>(0)
        try await listener.executeThenClose { clients in
            try await withThrowingDiscardingTaskGroup { group in
                for try await client in clients {
                    let number = numbers.add(1, ordering: .relaxed).newValue
                    // One child task a connection, ended with it (a discarding group keeps
                    // none after): as many as the connections the proxied nodes open.
                    group.addTask { await relay(client, number: number) }
                }
            }
        }
    }

    /// One client: its connection to the target, the two forwarding loops, and the decoder.
    private func relay(_ client: NIOAsyncChannel<ByteBuffer, ByteBuffer>, number: Int) async {
        let server: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            server = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.seconds(5))
                .connect(host: target.host, port: target.port) { channel in
                    channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
                }
        } catch {
            warn("connection \(number): cannot reach \(target): \(error)")
            try? await client.channel.close()
            return
        }
        // What passed, in the order it passed, for the decoder. Unbounded in count, as the
        // bytes must all be decoded; it holds at most what the decoder has not caught up with,
        // all of it forwarded already.
        let (passed, passing) = AsyncStream<(fromInitiator: Bool, bytes: ByteBuffer, time: Int64)>.makeStream()
        await withTaskGroup(of: Void.self) { group in
            // The decoder, a child of this relay: it ends when `passing` finishes below.
            group.addTask { await decode(passed, number: number) }
            await forward(client, server, passing)
            passing.finish()
        }
    }

    /// Copies each side's bytes to the other as they come, handing each piece to `passing`
    /// once written; either side closing ends both.
    private func forward(
        _ client: NIOAsyncChannel<ByteBuffer, ByteBuffer>, _ server: NIOAsyncChannel<ByteBuffer, ByteBuffer>,
        _ passing: AsyncStream<(fromInitiator: Bool, bytes: ByteBuffer, time: Int64)>.Continuation
    ) async {
        do {
            try await client.executeThenClose { clientIn, clientOut in
                try await server.executeThenClose { serverIn, serverOut in
                    // Two children, one a direction; the first to end cancels the other.
                    try await withThrowingTaskGroup(of: Void.self) { loops in
                        loops.addTask {
                            for try await bytes in clientIn {
                                try await serverOut.write(bytes)
                                passing.yield((true, bytes, Self.now()))
                            }
                        }
                        loops.addTask {
                            for try await bytes in serverIn {
                                try await clientOut.write(bytes)
                                passing.yield((false, bytes, Self.now()))
                            }
                        }
                        try await loops.next()
                        loops.cancelAll()
                    }
                }
            }
        } catch {
            // A connection reset ends the relay like a close.
        }
    }

    private func decode(_ passed: AsyncStream<(fromInitiator: Bool, bytes: ByteBuffer, time: Int64)>, number: Int) async {
        let decoder = ConnectionDecoder(number: number, hasKeyLog: keyLog.isGiven) { keyLog.entry(for: $0) }
        var offsets = (initiator: UInt64(0), responder: UInt64(0))
        show([DumpRecord(
            time: Self.now(), connection: number, from: "", offset: 0, length: 0, kind: "connection",
            fields: [DumpField("initiator", .string("client of \(listen)")), DumpField("responder", .string("\(target)"))])].filter(filter.admits))
        for await piece in passed {
            // The initiator writes its key log line as it sends message 3; message 2 passes
            // before that. Waiting here delays the dump, never the traffic.
            if let awaited = decoder.awaitedEntry, keyLog.isGiven { await keyLog.wait(for: awaited, seconds: 3) }
            let offset = piece.fromInitiator ? offsets.initiator : offsets.responder
            let records = decoder.feed(fromInitiator: piece.fromInitiator, offset: offset, piece.bytes.readableBytesView, time: piece.time)
            if piece.fromInitiator { offsets.initiator += UInt64(piece.bytes.readableBytes) } else { offsets.responder += UInt64(piece.bytes.readableBytes) }
            show(records.filter(filter.admits))
        }
    }

    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}

/// A key log read again as it grows (for the proxy, whose nodes write it as connections pass).
final class LiveKeyLog: Sendable {
    let path: String?
    private let entries = Mutex<[[UInt8]: KeyLogEntry]>([:])

    init(path: String?) {
        self.path = path
        reload()
    }

    var isGiven: Bool { path != nil }

    /// The connection's entry, reading the file again if it is not known yet.
    func entry(for connection: [UInt8]) -> KeyLogEntry? {
        if let known = entries.withLock({ $0[connection] }) { return known }
        reload()
        return entries.withLock { $0[connection] }
    }

    /// Polls the file until it names the connection, or `seconds` pass.
    func wait(for connection: [UInt8], seconds: Double) async {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while entry(for: connection) == nil, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    private func reload() {
        guard let path, let data = FileManager.default.contents(atPath: path) else { return }
        let (parsed, _) = KeyLogEntry.parse(String(decoding: data, as: UTF8.self))
        entries.withLock { $0 = parsed }
    }
}
