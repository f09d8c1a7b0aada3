import NIOCore
import WeftCrypto
import WeftWire

// MARK: - Sizes

/// A small data frame's payload: a chat message.
let smallPayloadByteCount = 64
/// A large data frame's payload: a file chunk.
let largePayloadByteCount = 64 * 1024

/// A payload of `count` bytes (contents do not matter to the cipher's speed).
func makePayload(_ count: Int) -> ByteBuffer {
    var buffer = ByteBuffer()
    buffer.writeRepeatingByte(0x5a, count: count)
    return buffer
}

/// An arbitrary clock reading: the state machines only compare readings, and no benchmark ticks.
let benchmarkNow = NIODeadline.uptimeNanoseconds(1_000_000_000)

// MARK: - Keys

/// Two transport codecs whose keys match, as after a handshake: what `a` seals `b` opens and the
/// other way round.
func makeCodecPair() -> (a: TransportCodec, b: TransportCodec) {
    let aToB = SecureBytes.random(count: CipherState.keyByteCount)
    let bToA = SecureBytes.random(count: CipherState.keyByteCount)
    return (
        TransportCodec(send: CipherState(key: aToB), receive: CipherState(key: bToA)),
        TransportCodec(send: CipherState(key: bToA), receive: CipherState(key: aToB))
    )
}

/// Two nodes of one mesh: the configurations are built once, outside every measured loop,
/// since a node builds its configuration once and not per connection.
struct MeshPair: Sendable {
    let initiator: ConnectionStateMachine.Configuration
    let responder: ConnectionStateMachine.Configuration

    init() {
        let meshKey = MeshKey.generate()
        initiator = .init(identity: .generate(), meshKey: meshKey, displayName: "bench-initiator")
        responder = .init(identity: .generate(), meshKey: meshKey, displayName: "bench-responder")
    }
}

// MARK: - Pumping two state machines

/// Runs a complete handshake between two fresh state machines in memory: preambles, the three
/// Noise messages, and the responder's first record (PING), which confirms the handshake to the
/// initiator. Returns both machines, established.
///
/// With `drain`, the initiator's PONG is delivered too, so both machines are idle and the next
/// record either side sends is the next the other expects.
func handshake(
    _ pair: MeshPair, drain: Bool = false
) -> (initiator: ConnectionStateMachine, responder: ConnectionStateMachine) {
    var initiator = ConnectionStateMachine(role: .initiator, configuration: pair.initiator)
    var responder = ConnectionStateMachine(role: .responder, configuration: pair.responder)
    var toResponder = outbound(initiator.start(now: benchmarkNow))
    var toInitiator = outbound(responder.start(now: benchmarkNow))
    while !(initiator.isEstablished && responder.isEstablished) || (drain && (toResponder != nil || toInitiator != nil)) {
        if let bytes = toResponder {
            toResponder = nil
            append(outbound(responder.receive(bytes, now: benchmarkNow)), to: &toInitiator)
        } else if let bytes = toInitiator {
            toInitiator = nil
            append(outbound(initiator.receive(bytes, now: benchmarkNow)), to: &toResponder)
        } else {
            fatalError("the in-memory handshake stalled before both sides were established")
        }
    }
    return (initiator, responder)
}

/// The bytes a machine asked to write, if any; a close is a bug in the benchmark's setup.
func outbound(_ actions: [ConnectionAction]) -> ByteBuffer? {
    var result: ByteBuffer?
    for action in actions {
        switch action {
        case .write(let bytes):
            append(bytes, to: &result)
        case .close(let end):
            fatalError("a benchmark connection closed: \(end)")
        case .authenticated, .data, .pong:
            break
        }
    }
    return result
}

private func append(_ bytes: ByteBuffer?, to pending: inout ByteBuffer?) {
    guard var bytes else { return }
    if pending == nil {
        pending = bytes
    } else {
        pending!.writeBuffer(&bytes)
    }
}

/// The only write in `actions`; the connection benchmarks send one frame per event.
func onlyWrite(_ actions: [ConnectionAction]) -> ByteBuffer {
    guard actions.count == 1, case .write(let bytes) = actions[0] else {
        fatalError("expected exactly one write, got \(actions)")
    }
    return bytes
}

/// The data payload delivered in `actions`, checked for its size.
func deliveredByteCount(_ actions: [ConnectionAction]) -> Int {
    guard actions.count == 1, case .data(let bytes) = actions[0] else {
        fatalError("expected exactly one data action, got \(actions)")
    }
    return bytes.readableBytes
}
