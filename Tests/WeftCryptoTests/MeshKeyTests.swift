import Testing
@testable import WeftCrypto

@Suite("MeshKey")
struct MeshKeyTests {
    private func expectDamaged(_ contents: String, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        do throws(WeftCryptoError) {
            _ = try MeshKey(fileContents: contents)
            Issue.record("damaged mesh key file parsed: \(contents.debugDescription)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.isDamagedFile, comment, sourceLocation: sourceLocation)
        }
    }

    @Test("file contents round-trip")
    func roundTrip() throws {
        let key = MeshKey.generate()
        let contents = key.fileContents()
        #expect(contents.hasPrefix("weftmesh1"))
        #expect(contents.hasSuffix("\n"))
        #expect(contents.count == "weftmesh1".count + 58 + 1)
        let parsed = try MeshKey(fileContents: contents)
        #expect(parsed == key)
        #expect(parsed.secret.count == MeshKey.byteCount)
        #expect(try MeshKey(fileContents: contents.uppercased()) == key)
        #expect(try MeshKey(fileContents: "  " + contents + "\n\n") == key)
        #expect(MeshKey.generate() != key)
    }

    @Test("the text form is fixed by the secret")
    func deterministic() throws {
        let secret = SecureBytes(copying: [UInt8](repeating: 0x5a, count: 32))
        #expect(MeshKey(secret: secret).fileContents() == MeshKey(secret: secret).fileContents())
        #expect(try MeshKey(fileContents: MeshKey(secret: secret).fileContents()).secret == secret)
    }

    @Test("damaged contents throw damagedFile")
    func damaged() {
        let contents = MeshKey.generate().fileContents()
        let characters = Array(contents.dropLast())  // without the newline
        for position in characters.indices {
            var altered = characters
            altered[position] = altered[position] == "b" ? "c" : "b"
            expectDamaged(String(altered), "position \(position) altered")
        }
        for length in 0..<characters.count {
            expectDamaged(String(characters.prefix(length)), "truncated to \(length)")
        }
        expectDamaged(String(characters) + "a")
        expectDamaged("")
        expectDamaged("not a key at all\n")
        // A user identifier is not a mesh key.
        expectDamaged(UserIdentifier.encode(NodeIdentity.generate().publicKey))
    }
}
