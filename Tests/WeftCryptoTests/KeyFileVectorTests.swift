import Foundation
import Testing
@testable import WeftCrypto

// Golden vectors for what Weft keeps on disk and in text (SPEC.md §9, §10), from
// Protocol/vectors/, checked in both directions: encoding gives the vector's bytes, and the
// vector's bytes open (or are refused) as the vector says.

/// The one loader for the vector files this target reads.
enum KeyVectorFile {
    static func load<File: Decodable>(_ name: String, as type: File.Type = File.self) throws -> File {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // WeftCryptoTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the package
            .appendingPathComponent("Protocol/vectors/\(name)")
        return try JSONDecoder().decode(File.self, from: Data(contentsOf: url))
    }
}

/// How a vector names a WeftCryptoError.
private func matches(_ error: WeftCryptoError, _ name: String) -> Bool {
    switch name {
    case "wrongPassphrase": error == .wrongPassphrase
    case "damagedFile": error.isDamagedFile
    case "invalidIdentifier": error.isInvalidIdentifier
    case "invalidPublicKey": error == .invalidPublicKey
    default: false
    }
}

private func secret(_ text: String?) -> SecureBytes? { text.map { SecureBytes(copying: Array($0.utf8)) } }

// MARK: - Identity file

struct IdentityFileVectors: Decodable, Sendable {
    struct Field: Decodable, Sendable {
        let offset: Int
        let name: String
        let hex: String
    }
    struct File: Decodable, Sendable, CustomTestStringConvertible {
        let description: String
        let protection: UInt8
        let passphrase: String?
        let opslimit: UInt32?
        let memlimitKiB: UInt32?
        let salt: String?
        let nonce: String?
        let hex: String
        let fields: [Field]
        var testDescription: String { description }
    }
    struct Rejection: Decodable, Sendable, CustomTestStringConvertible {
        let description: String
        let hex: String
        let passphrase: String?
        let error: String
        var testDescription: String { description }
    }
    let seed: String
    let publicKey: String
    let files: [File]
    let rejections: [Rejection]

    static func load() throws -> Self { try KeyVectorFile.load("identity-file.json") }
}

@Suite("Protocol vectors: sealed identity file (SPEC.md §10)")
struct IdentityFileVectorTests {
    @Test("each file seals to its bytes, splits at its offsets and opens to the seed's key",
          arguments: try IdentityFileVectors.load().files)
    func file(_ file: IdentityFileVectors.File) throws {
        let vectors = try IdentityFileVectors.load()
        let identity = NodeIdentity(seed: SecureBytes(copying: [UInt8](hex: vectors.seed)))
        #expect(identity.publicKey.bytes.hex == vectors.publicKey)
        let bytes = [UInt8](hex: file.hex)

        let sealed: [UInt8]
        if file.protection == 0 {
            sealed = SealedIdentity.seal(identity, protection: .none)
        } else {
            let cost = SealedIdentity.ArgonCost(operations: file.opslimit!, memoryKiB: file.memlimitKiB!)
            sealed = SealedIdentity.seal(
                identity, protection: .passphrase(secret(file.passphrase)!, cost: cost),
                salt: [UInt8](hex: file.salt!), nonce: [UInt8](hex: file.nonce!))
        }
        #expect(sealed.hex == file.hex)

        var end = 0
        for field in file.fields {
            #expect(field.offset == end, "\(field.name) follows the previous field")
            let value = [UInt8](hex: field.hex)
            #expect(Array(bytes[field.offset..<(field.offset + value.count)]) == value, "\(field.name)")
            end = field.offset + value.count
        }
        #expect(end == bytes.count)

        #expect(try SealedIdentity.isProtected(bytes) == (file.protection == 1))
        #expect(try SealedIdentity.publicIdentity(of: bytes).bytes.hex == vectors.publicKey)
        let opened = try SealedIdentity.open(bytes, passphrase: secret(file.passphrase))
        #expect(opened.publicKey.bytes.hex == vectors.publicKey)
        #expect(opened.seed.withUnsafeBytes { [UInt8]($0) }.hex == vectors.seed)
    }

    @Test("each rejected file fails with its error", arguments: try IdentityFileVectors.load().rejections)
    func rejection(_ rejection: IdentityFileVectors.Rejection) {
        do {
            let identity = try SealedIdentity.open([UInt8](hex: rejection.hex), passphrase: secret(rejection.passphrase))
            Issue.record("opened to \(identity.publicKey)")
        } catch {
            #expect(matches(error, rejection.error), "\(error)")
        }
    }
}

// MARK: - Key text

struct KeyTextVectors: Decodable, Sendable {
    struct Encoded: Decodable, Sendable, CustomTestStringConvertible {
        let description: String
        let key: String
        let checksum: String
        let text: String
        var testDescription: String { description }
    }
    struct Decoded: Decodable, Sendable, CustomTestStringConvertible {
        let description: String
        let text: String
        let key: String?
        let error: String?
        var testDescription: String { description }
    }
    struct Kind: Decodable, Sendable {
        let prefix: String
        let domain: String
        let encode: [Encoded]
        let decode: [Decoded]
    }
    let userIdentifiers: Kind
    let meshKeyFiles: Kind

    static func load() throws -> Self { try KeyVectorFile.load("key-text.json") }
}

@Suite("Protocol vectors: text forms of keys (SPEC.md §9)")
struct KeyTextVectorTests {
    @Test("user identifiers encode to their text and back", arguments: try KeyTextVectors.load().userIdentifiers.encode)
    func userIdentifier(_ entry: KeyTextVectors.Encoded) throws {
        let kind = try KeyTextVectors.load().userIdentifiers
        #expect(UserIdentifier.text.prefix == kind.prefix && UserIdentifier.text.domain == kind.domain)
        let key = [UInt8](hex: entry.key)
        #expect(BLAKE2b.hash(Array(kind.domain.utf8), key, outputByteCount: 4).hex == entry.checksum)
        let identity = try PublicIdentity(bytes: key)
        #expect(UserIdentifier.encode(identity) == entry.text)
        #expect(identity.description == entry.text)
        #expect(try UserIdentifier.decode(entry.text) == identity)
    }

    @Test("user identifier inputs are accepted or refused", arguments: try KeyTextVectors.load().userIdentifiers.decode)
    func userIdentifierInput(_ entry: KeyTextVectors.Decoded) {
        do {
            let identity = try UserIdentifier.decode(entry.text)
            #expect(identity.bytes.hex == entry.key, "accepted")
        } catch {
            #expect(entry.error.map { matches(error, $0) } == true, "\(error)")
        }
    }

    @Test("mesh key files encode to their text and back", arguments: try KeyTextVectors.load().meshKeyFiles.encode)
    func meshKeyFile(_ entry: KeyTextVectors.Encoded) throws {
        let kind = try KeyTextVectors.load().meshKeyFiles
        #expect(MeshKey.text.prefix == kind.prefix && MeshKey.text.domain == kind.domain)
        let key = [UInt8](hex: entry.key)
        #expect(BLAKE2b.hash(Array(kind.domain.utf8), key, outputByteCount: 4).hex == entry.checksum)
        let meshKey = MeshKey(secret: SecureBytes(copying: key))
        #expect(meshKey.fileContents() == entry.text)
        #expect(try MeshKey(fileContents: entry.text) == meshKey)
    }

    @Test("mesh key file contents are accepted or refused", arguments: try KeyTextVectors.load().meshKeyFiles.decode)
    func meshKeyInput(_ entry: KeyTextVectors.Decoded) {
        do {
            let meshKey = try MeshKey(fileContents: entry.text)
            #expect(meshKey.secret.withUnsafeBytes { [UInt8]($0) }.hex == entry.key, "accepted")
        } catch {
            #expect(entry.error.map { matches(error, $0) } == true, "\(error)")
        }
    }
}
