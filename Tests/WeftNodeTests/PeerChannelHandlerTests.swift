import NIOCore
import NIOEmbedded
import Testing
import WeftCrypto
@testable import WeftNode
import WeftWire

/// Holds every write until `release()`, so a test can see what happens while a write is in
/// flight (a socket that is not draining).
final class WriteGate: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var held: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        held.append((unwrapOutboundIn(data), promise))
    }

    func flush(context: ChannelHandlerContext) {}

    var heldCount: Int { held.count }

    /// Lets the held writes through, in order.
    func release() {
        guard let context else { return }
        let writes = held
        held = []
        for (bytes, promise) in writes { context.write(wrapOutboundOut(bytes), promise: promise) }
        context.flush()
    }
}

/// A socket whose peer is gone: once armed, a write closes the channel at once, inside the
/// write (as NIO does when a write fails with ECONNRESET).
final class ResetOnWrite: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    var armed = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard armed else { return context.write(data, promise: promise) }
        promise?.fail(ChannelError.ioOnClosedChannel)
        context.close(promise: nil)
    }
}

/// What reaches the layer above the handler, in order: events read, and the channel going
/// inactive (after which `NIOAsyncChannel` delivers nothing more).
final class InboundOrder: ChannelInboundHandler {
    typealias InboundIn = PeerChannelEvent
    var seen: [String] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .ended = unwrapInboundIn(data) { seen.append("ended") }
    }

    func channelInactive(context: ChannelHandlerContext) { seen.append("inactive") }
}

/// Two `PeerChannelHandler`s on `EmbeddedChannel`s, pumped against each other.
struct EmbeddedPair {
    let initiator = EmbeddedChannel()
    let responder = EmbeddedChannel()
    let initiatorGate = WriteGate()

    init(meshKey: MeshKey = .generate()) throws {
        for (channel, role, name) in [(initiator, ConnectionStateMachine.Role.initiator, "alice"), (responder, .responder, "bob")] {
            if channel === initiator { try channel.pipeline.syncOperations.addHandler(initiatorGate) }
            try channel.pipeline.syncOperations.addHandler(
                PeerChannelHandler(
                    role: role,
                    configuration: .init(identity: .generate(), meshKey: meshKey, displayName: name, policy: testPolicy),
                    tickInterval: .seconds(1), logger: quietLogger(name)))
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        }
    }

    /// Moves bytes both ways until neither side writes more.
    func pump() throws {
        initiatorGate.release()
        var moved = true
        while moved {
            moved = false
            for (from, to) in [(initiator, responder), (responder, initiator)] {
                while let bytes = try from.readOutbound(as: ByteBuffer.self) {
                    moved = true
                    if to.isActive { try to.writeInbound(bytes) }
                }
            }
            initiatorGate.release()
        }
    }

    /// Every event a side passed up to its session so far.
    static func events(_ channel: EmbeddedChannel) throws -> [PeerChannelEvent] {
        var events: [PeerChannelEvent] = []
        while let event = try channel.readInbound(as: PeerChannelEvent.self) { events.append(event) }
        return events
    }

    func authenticate() throws {
        try pump()
        for channel in [initiator, responder] {
            #expect(try Self.events(channel).contains { if case .authenticated = $0 { true } else { false } })
        }
    }
}

@Suite("peer channel handler on EmbeddedChannel")
struct PeerChannelHandlerTests {
    @Test("a write before the handshake fails its promise instead of vanishing")
    func writeBeforeHandshake() throws {
        let pair = try EmbeddedPair()
        let written = pair.responder.writeAndFlush(ByteBuffer(string: "too early"))
        #expect(throws: PeerChannelError.notEstablished) { try written.wait() }
    }

    @Test("DATA travels both ways once authenticated; the largest payload fits in one frame")
    func data() throws {
        let pair = try EmbeddedPair()
        try pair.authenticate()
        let largest = ByteBuffer(repeating: 0x5a, count: WireConstants.maxDataPayloadByteCount)
        let written = pair.responder.writeAndFlush(largest)
        try pair.pump()
        try written.wait()
        let received = try EmbeddedPair.events(pair.initiator).compactMap { event -> ByteBuffer? in
            if case .data(let bytes) = event { bytes } else { nil }
        }
        #expect(received == [largest])
    }

    @Test("a payload over the frame limit fails its promise; the channel stays up")
    func oversizedPayload() throws {
        let pair = try EmbeddedPair()
        try pair.authenticate()
        let tooLarge = ByteBuffer(repeating: 0, count: WireConstants.maxDataPayloadByteCount + 1)
        let written = pair.responder.writeAndFlush(tooLarge)
        #expect(throws: PeerChannelError.payloadTooLarge(WireConstants.maxDataPayloadByteCount + 1)) { try written.wait() }
        #expect(pair.responder.isActive)
        try pair.responder.writeAndFlush(ByteBuffer(string: "still fine")).wait()
        try pair.pump()
        #expect(try EmbeddedPair.events(pair.initiator).contains { if case .data = $0 { true } else { false } })
    }

    @Test("a CLOSE request closes the channel only once the CLOSE frame is written")
    func closeAfterFinalWrite() throws {
        let pair = try EmbeddedPair()
        try pair.authenticate()
        pair.initiator.pipeline.triggerUserOutboundEvent(
            PeerChannelHandler.CloseRequest(code: .shuttingDown, reason: "stopping"), promise: nil)
        pair.initiator.embeddedEventLoop.run()
        #expect(pair.initiatorGate.heldCount == 1)  // the CLOSE frame, not yet written
        #expect(pair.initiator.isActive)
        let ended = try EmbeddedPair.events(pair.initiator).compactMap { event -> ConnectionEnd? in
            if case .ended(let end) = event { end } else { nil }
        }
        #expect(ended.map(\.kind) == [.localClose])

        // The machine closed: a write now fails, it is not silently dropped.
        let late = pair.initiator.writeAndFlush(ByteBuffer(string: "too late"))
        #expect(throws: PeerChannelError.connectionClosed) { try late.wait() }

        try pair.pump()  // releases the CLOSE frame; the peer reads it
        #expect(!pair.initiator.isActive)
        let peerEnd = try EmbeddedPair.events(pair.responder).compactMap { event -> ConnectionEnd? in
            if case .ended(let end) = event { end } else { nil }
        }
        #expect(peerEnd.map(\.kind) == [.peerClosed])
        #expect(peerEnd.first?.detail.contains("shutting down") == true)
    }

    @Test("a final frame whose write closes the channel at once (the peer reset it) still tells the end before the channel goes inactive")
    func endToldWhenFinalWriteResets() throws {
        let pair = try EmbeddedPair()
        try pair.authenticate()
        let reset = ResetOnWrite()
        let order = InboundOrder()
        try pair.initiator.pipeline.syncOperations.addHandler(reset, position: .after(pair.initiatorGate))
        try pair.initiator.pipeline.syncOperations.addHandler(order)
        reset.armed = true
        pair.initiator.pipeline.triggerUserOutboundEvent(
            PeerChannelHandler.CloseRequest(code: .linkCut, reason: "the link to this node was cut"), promise: nil)
        pair.initiator.embeddedEventLoop.run()
        pair.initiatorGate.release()
        pair.initiator.embeddedEventLoop.run()
        #expect(!pair.initiator.isActive)
        #expect(order.seen == ["ended", "inactive"])
    }

    @Test("close() from above sends CLOSE(normal) first and completes when the channel closed")
    func closeFromAbove() throws {
        let pair = try EmbeddedPair()
        try pair.authenticate()
        let closed = pair.initiator.close()
        pair.initiator.embeddedEventLoop.run()
        #expect(pair.initiatorGate.heldCount == 1)
        #expect(pair.initiator.isActive)
        try pair.pump()
        pair.initiator.embeddedEventLoop.run()  // the channel completes its close future in a task
        #expect(!pair.initiator.isActive)
        try closed.wait()
        let peerEnd = try EmbeddedPair.events(pair.responder).compactMap { event -> ConnectionEnd? in
            if case .ended(let end) = event { end } else { nil }
        }
        #expect(peerEnd.map(\.kind) == [.peerClosed])
    }

    @Test("a final frame that never leaves is abandoned after the timeout")
    func finalWriteTimeout() throws {
        let pair = try EmbeddedPair()
        try pair.authenticate()
        let closed = pair.initiator.close()
        pair.initiator.embeddedEventLoop.advanceTime(by: PeerChannelHandler.finalWriteTimeout - .milliseconds(1))
        #expect(pair.initiator.isActive)
        pair.initiator.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!pair.initiator.isActive)
        try closed.wait()
    }
}
