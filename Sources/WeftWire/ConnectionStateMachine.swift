import NIOCore
import WeftBytes
import WeftCrypto

/// What a connection's owner must do after feeding an event to `ConnectionStateMachine`.
public enum ConnectionAction: Sendable {
    /// Write these bytes to the peer.
    case write(ByteBuffer)
    /// The handshake finished and the peer proved this identity.
    case authenticated(NodeInfo)
    /// Application bytes from the peer.
    case data(ByteBuffer)
    /// The peer answered our ping.
    case pong(roundTrip: TimeAmount)
    /// Close the connection, after any writes listed before this action.
    case close(ConnectionEnd)
}

/// One Weft connection as a sans-I/O state machine: preambles, the Noise XXpsk3 handshake,
/// then encrypted frames with keepalive and rekeying (SPEC.md §2–§5).
///
/// Bytes and clock readings go in; actions come out. The machine never touches a socket or a
/// clock, so two of them can be pumped against each other in memory. Randomness comes from
/// `Configuration.random`, so seeded machines replay byte for byte.
///
/// The transport ciphers inside are references (`CipherState`): a copy of an established
/// machine seals with the same nonce counters as the original, never with a used nonce.
public struct ConnectionStateMachine: Sendable {
    public enum Role: Sendable, Equatable { case initiator, responder }

    /// Everything a node brings to each connection.
    public struct Configuration: Sendable {
        public var identity: NodeIdentity
        public var meshKey: MeshKey
        public var displayName: String
        /// The port the node listens on, told to each peer in the node info.
        public var listenPort: UInt16?
        /// The feature bits told to each peer in the node info (§3.3). None by default: a node
        /// sets the bits of what it serves (the daemon sets *names*, having a name directory).
        public var features: NodeFeatures = []
        public var policy: ChannelPolicy
        /// Where handshakes draw their ephemeral keys: libsodium's CSPRNG on a node, a
        /// `SeededRandomSource` in a simulation, so the same seeds give the same bytes.
        public var random: any RandomSource
        /// Where each connection writes the secrets that decrypt it (SPEC.md §18), for
        /// inspection tools; none by default, and none should be set otherwise.
        public var keyLog: (any KeyLog)?
        /// The Noise static key, derived from `identity` once rather than per connection.
        let staticKey: X25519KeyPair

        public init(
            identity: NodeIdentity, meshKey: MeshKey, displayName: String, policy: ChannelPolicy = .default,
            random: any RandomSource = SystemRandomSource()
        ) {
            self.identity = identity
            self.meshKey = meshKey
            self.displayName = displayName
            self.policy = policy
            self.random = random
            self.staticKey = identity.agreementKeyPair()
        }

        var localInfo: NodeInfo {
            NodeInfo(identity: identity.publicKey, displayName: displayName, features: features.rawValue, listenPort: listenPort)
        }
    }

    private enum State: Sendable {
        case idle
        case awaitingPreamble(deadline: NIODeadline)
        case handshaking(NoiseHandshake, deadline: NIODeadline)
        case established(Established)
        case closed
    }

    /// Per-connection state once keys are agreed.
    private struct Established: Sendable {
        var codec: TransportCodec
        var peer: NodeInfo
        /// The initiator has sent its last handshake message but cannot know the responder
        /// accepted it until the first record from the responder opens. Until then the
        /// handshake deadline still applies, and nothing but PONG is sent.
        var confirmed: Bool
        var handshakeDeadline: NIODeadline
        var lastReceived: NIODeadline
        var lastSent: NIODeadline
        var lastRekey: NIODeadline
        var outstandingPing: (value: UInt64, sentAt: NIODeadline)?
        var nextPingValue: UInt64 = 1
    }

    public let role: Role
    private let configuration: Configuration
    private var state: State = .idle
    private var inbound = ByteBuffer()
    private let localPreamble = Preamble()
    /// Test vectors fix the ephemeral key; a fresh one is generated otherwise.
    private let fixedEphemeral: X25519KeyPair?

    public init(role: Role, configuration: Configuration) {
        self.init(role: role, configuration: configuration, fixedEphemeral: nil)
    }

    /// For golden vectors only: a deterministic handshake.
    public init(role: Role, configuration: Configuration, fixedEphemeral: X25519KeyPair?) {
        self.role = role
        self.configuration = configuration
        self.fixedEphemeral = fixedEphemeral
    }

    /// The authenticated peer, once known.
    public var peer: NodeInfo? {
        if case .established(let established) = state, established.confirmed { return established.peer }
        return nil
    }

    public var isEstablished: Bool { peer != nil }
    public var isClosed: Bool { if case .closed = state { true } else { false } }
    /// Whether the handshake messages are being exchanged (the preambles were): a peer that
    /// hangs up now has said nothing wrong, unlike one that hangs up on our final message.
    public var isHandshaking: Bool { if case .handshaking = state { true } else { false } }

    // MARK: - Events from the owner

    /// The TCP connection is up: send our preamble.
    public mutating func start(now: NIODeadline) -> [ConnectionAction] {
        guard case .idle = state else { preconditionFailure("start() called twice") }
        state = .awaitingPreamble(deadline: now + configuration.policy.handshakeTimeout)
        var buffer = ByteBuffer()
        localPreamble.write(to: &buffer)
        return [.write(buffer)]
    }

    /// Bytes arrived from the peer.
    public mutating func receive(_ bytes: ByteBuffer, now: NIODeadline) -> [ConnectionAction] {
        if inbound.readableBytes == 0 {
            inbound = bytes
        } else {
            var bytes = bytes
            inbound.writeBuffer(&bytes)
        }
        var output = Output()
        process(now: now, into: &output)
        // A fresh empty buffer costs nothing, where clear() would copy storage still shared
        // with the DATA slices just handed out.
        if inbound.readableBytes == 0 { inbound = ByteBuffer() } else { inbound.discardReadBytes() }
        return output.finish()
    }

    /// Sends application bytes. Only valid once the peer is authenticated (`isEstablished`).
    public mutating func send(data: ByteBuffer, now: NIODeadline) -> [ConnectionAction] {
        precondition(isEstablished, "send(data:) before the peer is authenticated")
        var output = Output()
        seal(.data(data), now: now, into: &output)
        return output.finish()
    }

    /// Called periodically (every second or so): handshake and idle timeouts, pings, rekeying.
    public mutating func tick(now: NIODeadline) -> [ConnectionAction] {
        var output = Output()
        switch state {
        case .idle, .closed:
            break
        case .awaitingPreamble(let deadline), .handshaking(_, let deadline):
            if now >= deadline {
                end(.timeout, "the handshake did not finish within \(configuration.policy.handshakeTimeout.seconds) s", into: &output)
            }
        case .established(let established) where !established.confirmed:
            if now >= established.handshakeDeadline {
                end(.handshakeFailed,
                    "the peer did not confirm the handshake within \(configuration.policy.handshakeTimeout.seconds) s: it most likely uses a different mesh key",
                    into: &output)
            }
        case .established(var established):
            let policy = configuration.policy
            if now - established.lastReceived >= policy.idleTimeout {
                seal(.close(.idleTimeout, "nothing received for \(policy.idleTimeout.seconds) s"), now: now, into: &output)
                end(.timeout, "nothing received from the peer for \(policy.idleTimeout.seconds) s", into: &output)
                return output.finish()
            }
            if established.outstandingPing == nil && now - established.lastSent >= policy.pingInterval {
                let value = established.nextPingValue
                established.nextPingValue &+= 1
                established.outstandingPing = (value, now)
                state = .established(established)
                seal(.ping(value), now: now, into: &output)
            }
            if case .established(let current) = state, now - current.lastRekey >= policy.rekeyAfterTime {
                rekey(now: now, into: &output)
            }
        }
        return output.finish()
    }

    /// We close the connection: a CLOSE frame if the channel is up, then `.close`.
    /// A second call, or a call after the machine ended the connection, does nothing.
    public mutating func close(_ code: CloseCode, reason: String, now: NIODeadline) -> [ConnectionAction] {
        if case .closed = state { return [] }
        var output = Output()
        if case .established = state { seal(.close(code, reason), now: now, into: &output) }
        end(.localClose, "closed by this node: \(reason)", into: &output)
        return output.finish()
    }

    /// The layer above saw bad input from the peer (a malformed sync message, §14.1): an
    /// ERROR frame if the channel is up, then `.close`. Does nothing once ended.
    public mutating func fail(_ code: ErrorCode, reason: String, now: NIODeadline) -> [ConnectionAction] {
        if case .closed = state { return [] }
        var output = Output()
        if case .established = state { seal(.error(code, reason), now: now, into: &output) }
        end(.protocolViolation, "closing: \(reason)", into: &output)
        return output.finish()
    }

    /// The TCP connection ended. Returns why, unless the machine already ended it.
    public mutating func connectionClosed() -> ConnectionEnd? {
        let end: ConnectionEnd
        switch state {
        case .closed:
            return nil
        case .idle, .awaitingPreamble:
            end = ConnectionEnd(.connectionLost, "the peer closed the connection before the handshake")
        case .handshaking:
            end = ConnectionEnd(.handshakeFailed, "the peer closed the connection during the handshake")
        case .established(let established) where !established.confirmed:
            end = ConnectionEnd(
                .handshakeFailed,
                "the peer rejected our final handshake message: it most likely uses a different mesh key")
        case .established:
            end = ConnectionEnd(.connectionLost, "the connection closed without a CLOSE frame")
        }
        state = .closed
        return end
    }

    // MARK: - Inbound processing

    private mutating func process(now: NIODeadline, into output: inout Output) {
        while true {
            switch state {
            case .idle, .closed:
                return
            case .awaitingPreamble(let deadline):
                guard readPreamble(deadline: deadline, into: &output) else { return }
            case .handshaking(let handshake, let deadline):
                guard readHandshakeMessage(handshake, deadline: deadline, now: now, into: &output) else { return }
            case .established(var established):
                let frame: Frame?
                do {
                    frame = try established.codec.open(from: &inbound)
                } catch {
                    state = .established(established)
                    seal(.error(error.code, error.description), now: now, into: &output)
                    end(.protocolViolation, "closing: \(error)", into: &output)
                    return
                }
                guard let frame else {
                    state = .established(established)
                    return
                }
                established.lastReceived = now
                if !established.confirmed {
                    established.confirmed = true
                    output.actions.append(.authenticated(established.peer))
                }
                state = .established(established)
                handle(frame, now: now, into: &output)
            }
        }
    }

    /// Returns true if it made progress.
    private mutating func readPreamble(deadline: NIODeadline, into output: inout Output) -> Bool {
        // The peer's preamble exactly as received goes into the prologue.
        guard let peerBytes = inbound.getBytes(at: inbound.readerIndex, length: WireConstants.preambleByteCount) else {
            return false
        }
        let peerPreamble: Preamble
        do {
            guard let preamble = try Preamble.read(from: &inbound) else { return false }
            peerPreamble = preamble
        } catch {
            end(.protocolViolation, "the peer is not a Weft node: its first bytes are not the magic \"WEFT\"", into: &output)
            return false
        }
        guard peerPreamble.version == localPreamble.version else {
            end(.versionMismatch,
                "the peer speaks Weft protocol version \(peerPreamble.version); this node speaks \(localPreamble.version)",
                into: &output)
            return false
        }
        let prologue = role == .initiator ? localPreamble.bytes + peerBytes : peerBytes + localPreamble.bytes
        var handshake: NoiseHandshake
        do {
            handshake = try NoiseHandshake(
                protocolName: WireConstants.noiseProtocolName, role: role == .initiator ? .initiator : .responder,
                prologue: prologue, localStatic: configuration.staticKey,
                preSharedKeys: [configuration.meshKey.secret], random: configuration.random,
                fixedEphemeral: fixedEphemeral, recordsSecrets: configuration.keyLog != nil)
        } catch {
            // Only a protocol name or key this build does not support gets here: our fault,
            // not the peer's, but it ends this connection and not the node.
            end(.handshakeFailed, "could not start the handshake: \(error)", into: &output)
            return false
        }
        if role == .initiator {
            // Message 1: -> psk-mixed e, with an empty payload.
            guard writeHandshakeMessage(&handshake, payload: [], into: &output) else { return false }
        }
        state = .handshaking(handshake, deadline: deadline)
        return true
    }

    private mutating func readHandshakeMessage(
        _ handshake: NoiseHandshake, deadline: NIODeadline, now: NIODeadline, into output: inout Output
    ) -> Bool {
        let message: [UInt8]
        do {
            // Nil until the whole message is there (SPEC.md §3.2: u16 length, then the message).
            guard let bytes = try inbound.readLengthPrefixedBytes(UInt16.self, limit: NoiseHandshake.maxMessageByteCount)
            else { return false }
            message = bytes
        } catch {
            end(.handshakeFailed, "a handshake message from the peer is invalid (\(error))", into: &output)
            return false
        }
        var handshake = handshake
        let messageNumber = role == .initiator ? 2 : (handshake.isOurTurn ? 0 : (handshake.remoteEphemeralKey == nil ? 1 : 3))

        let payload: [UInt8]
        do {
            payload = try handshake.readMessage(message)
        } catch {
            let why = messageNumber == 3
                ? "the peer's final handshake message failed authentication: it most likely uses a different mesh key"
                : "handshake message \(messageNumber) from the peer is invalid (\(error))"
            end(.handshakeFailed, why, into: &output)
            return false
        }

        switch (role, messageNumber) {
        case (.responder, 1):
            // Message 1's payload travels in the clear and means nothing in version 1: a
            // non-empty one is refused rather than ignored (SPEC.md §3.2).
            guard payload.isEmpty else {
                end(.handshakeFailed, "handshake message 1 from the peer carries a \(payload.count)-byte payload; it must be empty", into: &output)
                return false
            }
            // Message 2: <- e, ee, s, es with our node info.
            guard writeHandshakeMessage(&handshake, payload: configuration.localInfo.bytes, into: &output) else { return false }
            state = .handshaking(handshake, deadline: deadline)
        case (.initiator, _):
            guard let peer = verifiedPeer(payload, handshake: handshake, into: &output) else { return false }
            // Message 3: -> s, se, psk with our node info. Not authenticated until the
            // responder's first record proves it accepted the mesh key.
            guard writeHandshakeMessage(&handshake, payload: configuration.localInfo.bytes, into: &output) else { return false }
            let (send, receive) = handshake.split()
            logSecrets(of: handshake)
            state = .established(Established(
                codec: TransportCodec(send: send, receive: receive), peer: peer, confirmed: false,
                handshakeDeadline: deadline, lastReceived: now, lastSent: now, lastRekey: now))
        default:
            guard let peer = verifiedPeer(payload, handshake: handshake, into: &output) else { return false }
            let (send, receive) = handshake.split()
            logSecrets(of: handshake)
            state = .established(Established(
                codec: TransportCodec(send: send, receive: receive), peer: peer, confirmed: true,
                handshakeDeadline: deadline, lastReceived: now, lastSent: now, lastRekey: now))
            output.actions.append(.authenticated(peer))
            // Our first record tells the initiator its last message was accepted.
            var established = currentEstablished
            established.outstandingPing = (0, now)
            state = .established(established)
            seal(.ping(0), now: now, into: &output)
        }
        return true
    }

    /// Writes the session's secrets to the key log, if the configuration has one (§18).
    private func logSecrets(of handshake: NoiseHandshake) {
        guard let keyLog = configuration.keyLog, let secrets = handshake.sessionSecrets(),
            let ephemeral = role == .initiator ? handshake.localEphemeralKey : handshake.remoteEphemeralKey
        else { return }
        keyLog.record(KeyLogEntry(initiatorEphemeral: ephemeral, secrets: secrets))
    }

    private var currentEstablished: Established {
        guard case .established(let established) = state else { preconditionFailure("not established") }
        return established
    }

    /// Parses node info and checks the claimed Ed25519 key converts to the Noise static key.
    private mutating func verifiedPeer(_ payload: [UInt8], handshake: NoiseHandshake, into output: inout Output) -> NodeInfo? {
        let info: NodeInfo
        do {
            info = try NodeInfo(bytes: payload)
        } catch {
            end(.handshakeFailed, "the peer's node info is invalid: \(error)", into: &output)
            return nil
        }
        guard let converted = try? info.identity.agreementPublicKey() else {
            end(.handshakeFailed, "the peer's node info names an invalid Ed25519 key", into: &output)
            return nil
        }
        guard let remoteStatic = handshake.remoteStaticKey, constantTimeEquals(converted, remoteStatic) else {
            end(.handshakeFailed, "the peer's claimed identity \(info.identity) does not match its handshake key", into: &output)
            return nil
        }
        return info
    }

    private mutating func writeHandshakeMessage(
        _ handshake: inout NoiseHandshake, payload: [UInt8], into output: inout Output
    ) -> Bool {
        do {
            let message = try handshake.writeMessage(payload: payload)
            output.outbound.writeInteger(UInt16(message.count))
            output.outbound.writeBytes(message)
            return true
        } catch {
            end(.handshakeFailed, "could not write a handshake message: \(error)", into: &output)
            return false
        }
    }

    private mutating func handle(_ frame: Frame, now: NIODeadline, into output: inout Output) {
        switch frame {
        case .ping(let value):
            seal(.pong(value), now: now, into: &output)
        case .pong(let value):
            var established = currentEstablished
            if let ping = established.outstandingPing, ping.value == value {
                established.outstandingPing = nil
                state = .established(established)
                if value != 0 { output.actions.append(.pong(roundTrip: now - ping.sentAt)) }
            }
        case .close(let code, let text):
            end(.peerClosed, "the peer closed the connection (\(code)\(text.isEmpty ? "" : ": \(text)"))", into: &output)
        case .error(let code, let text):
            end(.peerReportedError, "the peer reported an error (\(code)\(text.isEmpty ? "" : ": \(text)"))", into: &output)
        case .rekey:
            break  // The codec already switched the receiving key.
        case .data(let bytes):
            output.actions.append(.data(bytes))
        }
    }

    // MARK: - Outbound

    private mutating func seal(_ frame: Frame, now: NIODeadline, into output: inout Output) {
        guard case .established(var established) = state else {
            preconditionFailure("a frame can only be sent on an established channel")
        }
        if established.codec.bytesSentSinceRekey >= configuration.policy.rekeyAfterBytes {
            state = .established(established)
            rekey(now: now, into: &output)
            established = currentEstablished
        }
        do {
            try established.codec.seal(frame, into: &output.outbound)
        } catch {
            state = .established(established)
            end(.localClose, "the sending cipher is exhausted: \(error)", into: &output)
            return
        }
        established.lastSent = now
        state = .established(established)
    }

    private mutating func rekey(now: NIODeadline, into output: inout Output) {
        var established = currentEstablished
        do {
            try established.codec.seal(.rekey, into: &output.outbound)
        } catch {
            end(.localClose, "the sending cipher is exhausted: \(error)", into: &output)
            return
        }
        established.codec.rekeySending()
        established.lastRekey = now
        established.lastSent = now
        state = .established(established)
    }

    private mutating func end(_ kind: ConnectionEnd.Kind, _ detail: String, into output: inout Output) {
        state = .closed
        output.flush()
        output.actions.append(.close(ConnectionEnd(kind, detail)))
    }

    /// Collects writes into one buffer per event, in order with the other actions.
    private struct Output {
        var actions: [ConnectionAction] = []
        var outbound = ByteBuffer()

        /// Every action, the pending write last.
        mutating func finish() -> [ConnectionAction] {
            flush()
            return actions
        }

        mutating func flush() {
            if outbound.readableBytes > 0 {
                actions.append(.write(outbound))
                outbound = ByteBuffer()
            }
        }
    }
}

extension TimeAmount {
    var seconds: Int64 { nanoseconds / 1_000_000_000 }
}
