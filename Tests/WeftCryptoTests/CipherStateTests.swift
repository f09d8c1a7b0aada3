import Testing
@testable import WeftCrypto

@Suite("CipherState")
struct CipherStateTests {
    private static let key = SecureBytes(copying: (0..<32).map { UInt8($0) })

    /// A sender and a receiver sharing one key.
    private func pair() -> (CipherState, CipherState) {
        (CipherState(key: Self.key), CipherState(key: Self.key))
    }

    @Test("encrypt then decrypt returns the plaintext; both nonces advance", arguments: [0, 1, 15, 16, 17, 1000])
    func roundTrip(length: Int) throws {
        let (sender, receiver) = pair()
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let ad: [UInt8] = Array("associated".utf8)
        let ciphertext = try sender.encrypt(associatedData: ad, plaintext: plaintext)
        #expect(ciphertext.count == length + CipherState.tagByteCount)
        if length > 0 { #expect(Array(ciphertext.prefix(length)) != plaintext) }
        #expect(try receiver.decrypt(associatedData: ad, ciphertext: ciphertext) == plaintext)
        #expect(sender.nonce == 1)
        #expect(receiver.nonce == 1)

        // The same plaintext under the next nonce encrypts differently.
        let second = try sender.encrypt(associatedData: ad, plaintext: plaintext)
        #expect(second != ciphertext)
        #expect(try receiver.decrypt(associatedData: ad, ciphertext: second) == plaintext)
    }

    @Test("a tampered byte fails with decryptionFailed and the nonce does not advance")
    func tamperedByte() throws {
        let (sender, receiver) = pair()
        let plaintext: [UInt8] = Array("attack at dawn".utf8)
        let ciphertext = try sender.encrypt(associatedData: [], plaintext: plaintext)
        for position in ciphertext.indices {
            var tampered = ciphertext
            tampered[position] ^= 0x01
            #expect(throws: WeftCryptoError.decryptionFailed) {
                try receiver.decrypt(associatedData: [], ciphertext: tampered)
            }
            #expect(receiver.nonce == 0, "a failed decryption must not advance the nonce")
        }
        // Wrong associated data, a short input and a truncated tag fail the same way.
        #expect(throws: WeftCryptoError.decryptionFailed) {
            try receiver.decrypt(associatedData: [1], ciphertext: ciphertext)
        }
        #expect(throws: WeftCryptoError.decryptionFailed) {
            try receiver.decrypt(associatedData: [], ciphertext: Array(ciphertext.prefix(15)))
        }
        #expect(throws: WeftCryptoError.decryptionFailed) {
            try receiver.decrypt(associatedData: [], ciphertext: Array(ciphertext.dropLast()))
        }
        #expect(receiver.nonce == 0)
        // The receiver is still usable: the genuine ciphertext opens.
        #expect(try receiver.decrypt(associatedData: [], ciphertext: ciphertext) == plaintext)
        #expect(receiver.nonce == 1)
    }

    @Test("a ciphertext does not open under the wrong nonce or key")
    func wrongNonceOrKey() throws {
        let (sender, receiver) = pair()
        let ciphertext = try sender.encrypt(associatedData: [], plaintext: [1, 2, 3])
        receiver.setNonce(1)
        #expect(throws: WeftCryptoError.decryptionFailed) { try receiver.decrypt(associatedData: [], ciphertext: ciphertext) }
        let other = CipherState(key: SecureBytes(copying: [UInt8](repeating: 9, count: 32)))
        #expect(throws: WeftCryptoError.decryptionFailed) { try other.decrypt(associatedData: [], ciphertext: ciphertext) }
    }

    @Test("in-place seal and open agree with the whole-message API")
    func inPlace() throws {
        let (sender, receiver) = pair()
        let reference = CipherState(key: Self.key)
        let plaintext: [UInt8] = Array("in place, no copies".utf8)
        let ad: [UInt8] = [0xaa, 0xbb]

        var buffer = plaintext + [UInt8](repeating: 0, count: CipherState.tagByteCount)
        try buffer.withUnsafeMutableBytes { raw in
            try sender.seal(inPlace: raw, plaintextByteCount: plaintext.count, associatedData: ad)
        }
        #expect(buffer == (try reference.encrypt(associatedData: ad, plaintext: plaintext)))
        #expect(sender.nonce == 1)

        let opened = try buffer.withUnsafeMutableBytes { raw in try receiver.open(inPlace: raw, associatedData: ad) }
        #expect(opened == plaintext.count)
        #expect(Array(buffer.prefix(opened)) == plaintext)
        #expect(receiver.nonce == 1)

        // A buffer larger than plaintext + tag: only the first bytes are sealed.
        var roomy = plaintext + [UInt8](repeating: 0xee, count: CipherState.tagByteCount + 8)
        try roomy.withUnsafeMutableBytes { raw in try sender.seal(inPlace: raw, plaintextByteCount: plaintext.count) }
        #expect(roomy.suffix(8).allSatisfy { $0 == 0xee }, "bytes after the tag are untouched")
        var record = Array(roomy.prefix(plaintext.count + CipherState.tagByteCount))
        let count = try record.withUnsafeMutableBytes { raw in try receiver.open(inPlace: raw) }
        #expect(Array(record.prefix(count)) == plaintext)

        // A tampered in-place record fails and leaves the nonce alone.
        var sealed = [UInt8](repeating: 1, count: 4 + CipherState.tagByteCount)
        try sealed.withUnsafeMutableBytes { raw in try sender.seal(inPlace: raw, plaintextByteCount: 4) }
        sealed[2] ^= 0x80
        #expect(throws: WeftCryptoError.decryptionFailed) {
            try sealed.withUnsafeMutableBytes { raw in try receiver.open(inPlace: raw) }
        }
        #expect(receiver.nonce == 2)
        var tooShort = [UInt8](repeating: 0, count: CipherState.tagByteCount - 1)
        #expect(throws: WeftCryptoError.decryptionFailed) {
            try tooShort.withUnsafeMutableBytes { raw in try receiver.open(inPlace: raw) }
        }
    }

    @Test("out-of-place open writes the plaintext into its own buffer and leaves the record as it was")
    func outOfPlace() throws {
        let (sender, receiver) = pair()
        let plaintext: [UInt8] = Array("decrypted straight into the frame's buffer".utf8)
        let record = try sender.encrypt(associatedData: [], plaintext: plaintext)
        var output = [UInt8](repeating: 0xee, count: plaintext.count + 3)
        let count = try record.withUnsafeBytes { raw in try output.withUnsafeMutableBytes { try receiver.open(raw, into: $0) } }
        #expect(count == plaintext.count && Array(output.prefix(count)) == plaintext)
        #expect(output.suffix(3) == [0xee, 0xee, 0xee], "nothing written past the plaintext")
        #expect(record == (try CipherState(key: Self.key).encrypt(associatedData: [], plaintext: plaintext)), "the record is untouched")
        #expect(receiver.nonce == 1)

        // A tampered record, or an output too small for its plaintext, fails and leaves the nonce.
        var tampered = try sender.encrypt(associatedData: [], plaintext: plaintext)
        tampered[0] ^= 1
        #expect(throws: WeftCryptoError.decryptionFailed) {
            try tampered.withUnsafeBytes { raw in try output.withUnsafeMutableBytes { try receiver.open(raw, into: $0) } }
        }
        var small = [UInt8](repeating: 0, count: plaintext.count - 1)
        #expect(throws: WeftCryptoError.decryptionFailed) {
            try record.withUnsafeBytes { raw in try small.withUnsafeMutableBytes { try receiver.open(raw, into: $0) } }
        }
        #expect(receiver.nonce == 1)
    }

    @Test("rekey changes the ciphertexts, keeps the nonce, and both sides stay in sync")
    func rekey() throws {
        let (sender, receiver) = pair()
        let unrekeyed = CipherState(key: Self.key)
        let plaintext: [UInt8] = Array("same words".utf8)

        _ = try sender.encrypt(associatedData: [], plaintext: plaintext)
        _ = try receiver.decrypt(associatedData: [], ciphertext: try unrekeyed.encrypt(associatedData: [], plaintext: plaintext))

        sender.rekey()
        receiver.rekey()
        #expect(sender.nonce == 1, "rekey keeps the nonce counting")
        #expect(receiver.nonce == 1)

        let afterRekey = try sender.encrypt(associatedData: [], plaintext: plaintext)
        let withOldKey = try unrekeyed.encrypt(associatedData: [], plaintext: plaintext)  // same nonce, old key
        #expect(afterRekey != withOldKey)
        #expect(try receiver.decrypt(associatedData: [], ciphertext: afterRekey) == plaintext)

        // A receiver that missed the rekey cannot open the new ciphertexts.
        let stale = CipherState(key: Self.key)
        stale.setNonce(1)
        #expect(throws: WeftCryptoError.decryptionFailed) { try stale.decrypt(associatedData: [], ciphertext: afterRekey) }

        // Rekeying is deterministic (Noise §4.2): a second pair rekeyed the same way agrees.
        let copy = CipherState(key: Self.key)
        copy.rekey()
        copy.setNonce(1)
        #expect(try copy.decrypt(associatedData: [], ciphertext: afterRekey) == plaintext)

        // Keep going for a few messages both ways with repeated rekeys.
        for round in 0..<5 {
            sender.rekey()
            receiver.rekey()
            let message = [UInt8](repeating: UInt8(round), count: round * 10)
            let ciphertext = try sender.encrypt(associatedData: [], plaintext: message)
            #expect(try receiver.decrypt(associatedData: [], ciphertext: ciphertext) == message)
        }
    }

    @Test("the nonce 2^64-1 is never used: encrypt and decrypt throw nonceExhausted")
    func nonceExhaustion() throws {
        let (sender, receiver) = pair()
        sender.setNonce(.max - 1)
        receiver.setNonce(.max - 1)
        let last = try sender.encrypt(associatedData: [], plaintext: [42])
        #expect(try receiver.decrypt(associatedData: [], ciphertext: last) == [42])
        #expect(sender.nonce == .max)

        #expect(throws: WeftCryptoError.nonceExhausted) { try sender.encrypt(associatedData: [], plaintext: [1]) }
        #expect(sender.nonce == .max)
        #expect(throws: WeftCryptoError.nonceExhausted) { try receiver.decrypt(associatedData: [], ciphertext: last) }
        var buffer = [UInt8](repeating: 0, count: 1 + CipherState.tagByteCount)
        #expect(throws: WeftCryptoError.nonceExhausted) {
            try buffer.withUnsafeMutableBytes { raw in try sender.seal(inPlace: raw, plaintextByteCount: 1) }
        }
    }

    @Test("without a key, encrypt and decrypt pass bytes through (Noise §5.1)")
    func noKey() throws {
        let cipher = CipherState()
        #expect(!cipher.hasKey)
        #expect(try cipher.encrypt(associatedData: [1], plaintext: [1, 2, 3]) == [1, 2, 3])
        #expect(try cipher.decrypt(associatedData: [1], ciphertext: [4, 5]) == [4, 5])
        #expect(cipher.nonce == 0)
        #expect(CipherState(key: Self.key).hasKey)
    }
}
