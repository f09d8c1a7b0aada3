import Benchmark
import WeftCrypto
import WeftWire

/// Handshakes per second on one core, and the X25519 work that bounds them.
///
/// Each side of an XXpsk3 handshake does four X25519 operations (one key generation and three
/// DH), so X25519 speed sets the ceiling: handshakes/s <= X25519 ops/s / 8 on one core running
/// both sides.
func registerHandshakeBenchmarks() {
    let handshakeConfiguration = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .mallocCountTotal],
        maxDuration: .seconds(2)
    )

    // MARK: - The whole connection handshake

    let pair = MeshPair()
    Benchmark("Handshake: ConnectionStateMachine pair", configuration: handshakeConfiguration) { benchmark in
        for _ in benchmark.scaledIterations {
            let (initiator, responder) = handshake(pair)
            blackHole(initiator)
            blackHole(responder)
        }
    }

    // MARK: - Noise alone

    let meshKey = MeshKey.generate()
    let initiatorStatic = NodeIdentity.generate().agreementKeyPair()
    let responderStatic = NodeIdentity.generate().agreementKeyPair()
    let prologue = Preamble().bytes + Preamble().bytes
    Benchmark("Handshake: NoiseHandshake XXpsk3 pair", configuration: handshakeConfiguration) { benchmark in
        for _ in benchmark.scaledIterations {
            do {
                var initiator = try NoiseHandshake(
                    protocolName: WireConstants.noiseProtocolName, role: .initiator, prologue: prologue,
                    localStatic: initiatorStatic, preSharedKeys: [meshKey.secret])
                var responder = try NoiseHandshake(
                    protocolName: WireConstants.noiseProtocolName, role: .responder, prologue: prologue,
                    localStatic: responderStatic, preSharedKeys: [meshKey.secret])
                _ = try responder.readMessage(initiator.writeMessage(payload: []))
                _ = try initiator.readMessage(responder.writeMessage(payload: []))
                _ = try responder.readMessage(initiator.writeMessage(payload: []))
                blackHole(initiator.split())
                blackHole(responder.split())
            } catch {
                benchmark.error("the Noise handshake failed: \(error)")
            }
        }
    }

    // MARK: - X25519, the limit

    let perOperation = Benchmark.Configuration(
        metrics: [.throughput, .wallClock], scalingFactor: .kilo, maxDuration: .seconds(2))
    let remote = X25519KeyPair.generate().publicKey

    // Two X25519 operations per inner iteration: X25519 ops/s = 2 x throughput.
    Benchmark("X25519: generate + sharedSecret (2 ops)", configuration: perOperation) { benchmark in
        for _ in benchmark.scaledIterations {
            let local = X25519KeyPair.generate()
            blackHole(try? local.sharedSecret(with: remote))
        }
    }

    Benchmark("X25519: generate (1 op, fixed base)", configuration: perOperation) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(X25519KeyPair.generate())
        }
    }

    let local = X25519KeyPair.generate()
    Benchmark("X25519: sharedSecret (1 op)", configuration: perOperation) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try? local.sharedSecret(with: remote))
        }
    }

    // The state machine also converts the peer's Ed25519 key to X25519, twice per side (once in
    // `NodeInfo(bytes:)` to validate it, once to compare with the Noise static key).
    let identity = NodeIdentity.generate().publicKey
    Benchmark("X25519: Ed25519 public key conversion (1 op)", configuration: perOperation) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try? identity.agreementPublicKey())
        }
    }

    // MARK: - The symmetric side of Noise

    // Per handshake pair: 12 two-output HKDFs (five MixKey and one Split per side) and two
    // three-output ones (the psk token), each 3 or 4 HMAC-BLAKE2b.
    let chainingKey = SecureBytes.random(count: BLAKE2b.outputByteCount)
    let inputKeyMaterial = SecureBytes.random(count: X25519KeyPair.keyByteCount)
    let perHKDF = Benchmark.Configuration(
        metrics: [.throughput, .wallClock, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(1))
    Benchmark("Noise: HKDF-BLAKE2b, 2 outputs", configuration: perHKDF) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(BLAKE2b.hkdf(chainingKey: chainingKey, inputKeyMaterial: inputKeyMaterial, outputs: 2))
        }
    }
}
