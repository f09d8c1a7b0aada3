import Testing
@testable import WeftCrypto

@Suite("SealedIdentity")
struct SealedIdentityTests {
    /// The cheapest Argon2id costs `deriveKey` accepts (libsodium's OPSLIMIT_MIN and
    /// MEMLIMIT_MIN, 1 pass over 8 KiB), so the suite stays fast.
    static let cheap = SealedIdentity.ArgonCost(operations: 1, memoryKiB: 8)
    static let passphrase = SecureBytes(copying: Array("correct horse battery staple".utf8))
    static let identity = NodeIdentity(seed: SecureBytes(copying: (0..<32).map { UInt8(255 - $0) }))

    static let unprotectedLength = 8 + 32 + 32 + 16
    static let protectedLength = 8 + 32 + 8 + 16 + 24 + 48 + 16

    /// Files sealed once per run (Argon2id is the slow part).
    static let protectedFile = SealedIdentity.seal(identity, protection: .passphrase(passphrase, cost: cheap))
    static let unprotectedFile = SealedIdentity.seal(identity, protection: .none)

    enum Kind: String, CaseIterable, Sendable { case unprotected, passphrase }

    static func file(_ kind: Kind) -> [UInt8] { kind == .unprotected ? unprotectedFile : protectedFile }

    /// Replaces the trailing BLAKE2b-128 checksum with the right one for the altered body.
    static func rechecksummed(_ file: [UInt8]) -> [UInt8] {
        let body = Array(file.dropLast(16))
        return body + BLAKE2b.hash(body, outputByteCount: 16)
    }

    private func expectDamaged(
        _ file: [UInt8], passphrase: SecureBytes? = passphrase, _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do throws(WeftCryptoError) {
            let opened = try SealedIdentity.open(file, passphrase: passphrase)
            Issue.record("a damaged file opened as \(opened.publicKey) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
        } catch {
            #expect(error.isDamagedFile, "\(error) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
        }
        #expect(throws: (any Error).self, comment, sourceLocation: sourceLocation) { try SealedIdentity.publicIdentity(of: file) }
    }

    // MARK: - Round trips

    @Test("layout: magic, version, protection, public key, expected length")
    func layout() {
        for (file, protection, length) in [(Self.unprotectedFile, 0, Self.unprotectedLength), (Self.protectedFile, 1, Self.protectedLength)] {
            #expect(file.count == length)
            #expect(Array(file[0..<6]) == Array("WEFTID".utf8))
            #expect(file[6] == 1)
            #expect(file[7] == UInt8(protection))
            #expect(Array(file[8..<40]) == Self.identity.publicKey.bytes)
        }
        // The costs are recorded big-endian.
        #expect(Array(Self.protectedFile[40..<48]) == [0, 0, 0, 1, 0, 0, 0, 8])
        // The seed does not appear in a protected file.
        let seed = Self.identity.seed.withUnsafeBytes { [UInt8]($0) }
        #expect(!Self.protectedFile.windows(ofCount: 32).contains { Array($0) == seed })
        #expect(Self.unprotectedFile.windows(ofCount: 32).contains { Array($0) == seed })
    }

    @Test("a passphrase-protected file opens with its passphrase")
    func roundTripProtected() throws {
        let opened = try SealedIdentity.open(Self.protectedFile, passphrase: Self.passphrase)
        #expect(opened.publicKey == Self.identity.publicKey)
        #expect(opened.seed == Self.identity.seed)
        #expect(try SealedIdentity.isProtected(Self.protectedFile))
        // Sealing twice uses a fresh salt and nonce.
        let again = SealedIdentity.seal(Self.identity, protection: .passphrase(Self.passphrase, cost: Self.cheap))
        #expect(again != Self.protectedFile)
        #expect(try SealedIdentity.open(again, passphrase: Self.passphrase).publicKey == Self.identity.publicKey)
    }

    @Test("an unprotected file opens with any passphrase or none")
    func roundTripUnprotected() throws {
        #expect(try SealedIdentity.open(Self.unprotectedFile, passphrase: nil).seed == Self.identity.seed)
        #expect(try SealedIdentity.open(Self.unprotectedFile, passphrase: Self.passphrase).seed == Self.identity.seed)
        #expect(try !SealedIdentity.isProtected(Self.unprotectedFile))
        #expect(SealedIdentity.seal(Self.identity, protection: .none) == Self.unprotectedFile)
    }

    @Test("the public identity is readable without the passphrase", arguments: Kind.allCases)
    func publicIdentityWithoutPassphrase(kind: Kind) throws {
        #expect(try SealedIdentity.publicIdentity(of: Self.file(kind)) == Self.identity.publicKey)
    }

    @Test("a wrong, empty or missing passphrase throws wrongPassphrase")
    func wrongPassphrase() {
        for passphrase in [
            SecureBytes(copying: Array("correct horse battery stapler".utf8)),
            SecureBytes(copying: Array("Correct horse battery staple".utf8)),
            SecureBytes(copying: [UInt8]()),
            nil,
        ] {
            #expect(throws: WeftCryptoError.wrongPassphrase) {
                try SealedIdentity.open(Self.protectedFile, passphrase: passphrase)
            }
        }
    }

    // MARK: - Damage

    @Test("every truncation is a damaged file", arguments: Kind.allCases)
    func everyTruncation(kind: Kind) {
        let file = Self.file(kind)
        for length in 0..<file.count {
            expectDamaged(Array(file.prefix(length)), "truncated to \(length) bytes")
        }
        expectDamaged(file + [0], "one byte too long")
    }

    @Test("flipping any bit of any byte is a damaged file (checksum), never a success", arguments: Kind.allCases)
    func everyByteFlipped(kind: Kind) {
        let file = Self.file(kind)
        for position in file.indices {
            for mask: UInt8 in [0x01, 0x80, 0xff] {
                var damaged = file
                damaged[position] ^= mask
                expectDamaged(damaged, "byte \(position) ^ \(mask)")
            }
        }
    }

    @Test("an altered sealed seed with a recomputed checksum never opens")
    func alteredSealedSeed() {
        let sealedStart = 8 + 32 + 8 + 16 + 24
        for position in sealedStart..<(Self.protectedLength - 16) {
            var altered = Self.protectedFile
            altered[position] ^= 0x01
            let file = Self.rechecksummed(altered)
            #expect(throws: WeftCryptoError.wrongPassphrase, "sealed byte \(position)") {
                try SealedIdentity.open(file, passphrase: Self.passphrase)
            }
        }
        // Altering the recorded public key, salt or nonce (all authenticated) fails too.
        for position in [8, 39, 48, 63, 64, 87] {
            var altered = Self.protectedFile
            altered[position] ^= 0x01
            let file = Self.rechecksummed(altered)
            do throws(WeftCryptoError) {
                _ = try SealedIdentity.open(file, passphrase: Self.passphrase)
                Issue.record("altered byte \(position) opened")
            } catch {
                #expect(error == .wrongPassphrase || error.isDamagedFile, "byte \(position): \(error)")
            }
        }
    }

    @Test("an altered seed in an unprotected file with a recomputed checksum is damaged (key mismatch)")
    func alteredUnprotectedSeed() {
        for position in [40, 50, 71] {
            var altered = Self.unprotectedFile
            altered[position] ^= 0x01
            expectDamagedOpen(Self.rechecksummed(altered), "seed byte \(position)")
        }
        var otherKey = Self.unprotectedFile
        otherKey.replaceSubrange(8..<40, with: NodeIdentity.generate().publicKey.bytes)
        expectDamagedOpen(Self.rechecksummed(otherKey), "another public key recorded")
    }

    private func expectDamagedOpen(_ file: [UInt8], _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
        do throws(WeftCryptoError) {
            _ = try SealedIdentity.open(file, passphrase: nil)
            Issue.record("opened: \(comment)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.isDamagedFile, comment, sourceLocation: sourceLocation)
        }
    }

    static let absurdCosts: [(operations: UInt32, memoryKiB: UInt32)] = [
        (1, .max),  // 4 TiB
        (1, (1 << 20) + 1),  // just over the 1 GiB cap
        (1, 0),
        (1, 7),  // under libsodium's 8 KiB minimum
        (0, 8),
        (65, 8),
        (.max, 8),
        (.max, .max),
    ]

    @Test("out-of-range Argon2id costs in a re-checksummed file are damaged, with no huge allocation",
          arguments: absurdCosts)
    func absurdArgonCost(operations: UInt32, memoryKiB: UInt32) throws {
        var file = Self.protectedFile
        let encode = { (value: UInt32) in (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
        file.replaceSubrange(40..<44, with: encode(operations))
        file.replaceSubrange(44..<48, with: encode(memoryKiB))
        let altered = Self.rechecksummed(file)
        do throws(WeftCryptoError) {
            _ = try SealedIdentity.open(altered, passphrase: Self.passphrase)
            Issue.record("opened with costs \(operations), \(memoryKiB)")
        } catch {
            #expect(error.isDamagedFile, "\(error)")
        }
        // The public key is still readable: the header is intact.
        #expect(try SealedIdentity.publicIdentity(of: altered) == Self.identity.publicKey)
    }

    @Test("unknown versions and protections are damaged, even with a valid checksum")
    func unknownVersionOrProtection() {
        for (position, value) in [(6, UInt8(0)), (6, 2), (7, 2), (7, 0xff)] {
            var file = Self.protectedFile
            file[position] = value
            expectDamaged(Self.rechecksummed(file), "byte \(position) = \(value)")
        }
        var notWeft = Self.unprotectedFile
        notWeft[0] = UInt8(ascii: "X")
        expectDamaged(Self.rechecksummed(notWeft), "wrong magic")
        expectDamaged([], "empty")
        expectDamaged(Array(repeating: 0, count: Self.protectedLength), "zeros")
    }
}

extension Array {
    /// Every run of `count` consecutive elements.
    fileprivate func windows(ofCount count: Int) -> [ArraySlice<Element>] {
        guard self.count >= count else { return [] }
        return (0...(self.count - count)).map { self[$0..<($0 + count)] }
    }
}
