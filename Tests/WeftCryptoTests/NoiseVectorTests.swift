import Foundation
import Testing
@testable import WeftCrypto

/// One cacophony vector (see Vectors/SOURCES.md for provenance).
struct NoiseVector: Decodable, Sendable, CustomTestStringConvertible {
    struct Message: Decodable, Sendable {
        let payload: String
        let ciphertext: String
    }
    let protocol_name: String
    let init_prologue: String
    let init_psks: [String]?
    let init_static: String?
    let init_ephemeral: String
    let init_remote_static: String?
    let resp_prologue: String
    let resp_psks: [String]?
    let resp_static: String?
    let resp_ephemeral: String?
    let resp_remote_static: String?
    let handshake_hash: String
    let messages: [Message]

    var testDescription: String { protocol_name }

    static let all: [NoiseVector] = {
        struct File: Decodable { let vectors: [NoiseVector] }
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Vectors/noise-25519-chachapoly-blake2b.json")
        return try! JSONDecoder().decode(File.self, from: Data(contentsOf: url)).vectors
    }()
}

private func keyPair(_ hex: String?) -> X25519KeyPair? {
    hex.map { X25519KeyPair(privateKey: SecureBytes(copying: [UInt8](hex: $0))) }
}

@Suite("Noise cacophony vectors")
struct NoiseVectorTests {
    @Test("the vector file holds XX and XXpsk3")
    func requiredVectorsPresent() {
        let names = Set(NoiseVector.all.map(\.protocol_name))
        #expect(names.contains("Noise_XX_25519_ChaChaPoly_BLAKE2b"))
        #expect(names.contains("Noise_XXpsk3_25519_ChaChaPoly_BLAKE2b"))
        #expect(NoiseVector.all.count == 36)
    }

    @Test("every message's ciphertext and the handshake hash match", arguments: NoiseVector.all)
    func vector(_ v: NoiseVector) throws {
        var initiator = try NoiseHandshake(
            protocolName: v.protocol_name, role: .initiator, prologue: [UInt8](hex: v.init_prologue),
            localStatic: keyPair(v.init_static), remoteStaticKey: v.init_remote_static.map { [UInt8](hex: $0) },
            preSharedKeys: (v.init_psks ?? []).map { SecureBytes(copying: [UInt8](hex: $0)) },
            fixedEphemeral: keyPair(v.init_ephemeral))
        var responder = try NoiseHandshake(
            protocolName: v.protocol_name, role: .responder, prologue: [UInt8](hex: v.resp_prologue),
            localStatic: keyPair(v.resp_static), remoteStaticKey: v.resp_remote_static.map { [UInt8](hex: $0) },
            preSharedKeys: (v.resp_psks ?? []).map { SecureBytes(copying: [UInt8](hex: $0)) },
            fixedEphemeral: keyPair(v.resp_ephemeral))

        let handshakeLength = initiator.pattern.messages.count
        var index = 0
        // Handshake messages alternate, starting with the initiator.
        while index < handshakeLength {
            let message = v.messages[index]
            let initiatorSends = index % 2 == 0
            let ciphertext: [UInt8]
            let payload: [UInt8]
            if initiatorSends {
                ciphertext = try initiator.writeMessage(payload: [UInt8](hex: message.payload))
                payload = try responder.readMessage(ciphertext)
            } else {
                ciphertext = try responder.writeMessage(payload: [UInt8](hex: message.payload))
                payload = try initiator.readMessage(ciphertext)
            }
            #expect(ciphertext.hex == message.ciphertext, "handshake message \(index)")
            #expect(payload.hex == message.payload, "handshake message \(index)")
            index += 1
        }
        #expect(initiator.isComplete && responder.isComplete)
        #expect(initiator.handshakeHash.hex == v.handshake_hash)
        #expect(responder.handshakeHash.hex == v.handshake_hash)

        // Transport: keep alternating (one-way patterns only send initiator to responder).
        let (initiatorSend, initiatorReceive) = initiator.split()
        let (responderSend, responderReceive) = responder.split()
        let oneWay = initiator.pattern.isOneWay
        for (offset, message) in v.messages[handshakeLength...].enumerated() {
            let initiatorSends = oneWay || (handshakeLength + offset) % 2 == 0
            let plaintext = [UInt8](hex: message.payload)
            let ciphertext: [UInt8]
            let opened: [UInt8]
            if initiatorSends {
                ciphertext = try initiatorSend.encrypt(associatedData: [], plaintext: plaintext)
                opened = try responderReceive.decrypt(associatedData: [], ciphertext: ciphertext)
            } else {
                ciphertext = try responderSend.encrypt(associatedData: [], plaintext: plaintext)
                opened = try initiatorReceive.decrypt(associatedData: [], ciphertext: ciphertext)
            }
            #expect(ciphertext.hex == message.ciphertext, "transport message \(handshakeLength + offset)")
            #expect(opened == plaintext)
        }
    }
}
