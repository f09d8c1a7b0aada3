import Testing
@testable import WeftCrypto

@Suite("UserIdentifier")
struct UserIdentifierTests {
    /// A fixed identity, so the substitution sweep is the same on every run.
    static let identity = NodeIdentity(seed: SecureBytes(copying: (0..<32).map { UInt8($0 * 5 + 1) })).publicKey
    static let identifier = UserIdentifier.encode(identity)

    private func expectInvalid(_ text: String, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        do throws(WeftCryptoError) {
            let parsed = try UserIdentifier.decode(text)
            Issue.record("\(text) parsed as \(parsed) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
        } catch {
            #expect(error.isInvalidIdentifier, comment, sourceLocation: sourceLocation)
        }
    }

    @Test("an identifier is weft1 and 58 base32 characters, and round-trips")
    func roundTrip() throws {
        let text = Self.identifier
        #expect(text.hasPrefix("weft1"))
        #expect(text.count == 5 + 58)
        #expect(text.dropFirst(5).allSatisfy { "abcdefghijklmnopqrstuvwxyz234567".contains($0) })
        #expect(try UserIdentifier.decode(text) == Self.identity)
        for _ in 0..<5 {
            let identity = NodeIdentity.generate().publicKey
            #expect(try UserIdentifier.decode(UserIdentifier.encode(identity)) == identity)
        }
    }

    @Test("every single-character substitution is rejected")
    func everySubstitutionRejected() {
        let characters = Array(Self.identifier)
        // In the alphabet (so only the checksum can catch it) and outside it.
        let replacements: [Character] = ["a", "q", "7", "2", "1", "0", "!", " "]
        var tried = 0
        for position in characters.indices {
            for replacement in replacements where replacement != characters[position] {
                var altered = characters
                altered[position] = replacement
                let text = String(altered)
                // A space at either end is trimmed, which removes a character: still invalid.
                expectInvalid(text, "position \(position) replaced by \(replacement)")
                tried += 1
            }
        }
        #expect(tried > 58 * 6)
    }

    @Test("swapping two neighbouring characters is rejected")
    func transpositionsRejected() {
        let characters = Array(Self.identifier)
        for position in 5..<(characters.count - 1) where characters[position] != characters[position + 1] {
            var altered = characters
            altered.swapAt(position, position + 1)
            expectInvalid(String(altered), "swap at \(position)")
        }
    }

    @Test("a wrong prefix is rejected", arguments: ["weft2", "weftmesh1", "wef1", "", "xeft1"])
    func wrongPrefix(prefix: String) {
        expectInvalid(prefix + Self.identifier.dropFirst(5))
    }

    @Test("wrong lengths are rejected")
    func wrongLength() {
        let text = Self.identifier
        for drop in 1...8 {
            expectInvalid(String(text.dropLast(drop)), "\(drop) characters short")
        }
        for extra in ["a", "aa", "aaaaaaaa", "q"] {
            expectInvalid(text + extra, "\(extra.count) characters long")
        }
        expectInvalid("weft1")
        expectInvalid("")
        expectInvalid(String(text.prefix(5) + text.dropFirst(6)), "one character missing inside")
    }

    @Test("a last character with non-zero unused bits is refused for that reason")
    func nonZeroTrailingBits() {
        // 288 bits fill 58 characters with 2 unused bits: flipping them changes no byte.
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        let characters = Array(Self.identifier)
        let last = alphabet.firstIndex(of: characters.last!)!
        #expect(last & 0b11 == 0, "an encoder writes the unused bits as zero")
        for bits in 1...3 {
            let text = String(characters.dropLast()) + String(alphabet[last | bits])
            do throws(WeftCryptoError) {
                _ = try UserIdentifier.decode(text)
                Issue.record("\(text) parsed")
            } catch {
                #expect(error.isInvalidIdentifier)
                #expect(error.description.contains("unused trailing bits are not zero"), "\(error)")
                #expect(!error.description.contains("outside a-z"), "\(error)")
            }
        }
    }

    @Test("upper case is accepted")
    func upperCase() throws {
        #expect(try UserIdentifier.decode(Self.identifier.uppercased()) == Self.identity)
        let mixed = String(Self.identifier.enumerated().map { $0.offset % 2 == 0 ? Character($0.element.uppercased()) : $0.element })
        #expect(try UserIdentifier.decode(mixed) == Self.identity)
    }

    @Test("surrounding whitespace is trimmed, inner whitespace is not")
    func whitespace() throws {
        for text in [" \(Self.identifier)", "\(Self.identifier)\n", "\t \(Self.identifier) \r\n"] {
            #expect(try UserIdentifier.decode(text) == Self.identity)
        }
        let characters = Array(Self.identifier)
        expectInvalid(String(characters[0..<20]) + " " + String(characters[20...]))
    }

    @Test("a mesh key's text is not a user identifier, even with its prefix swapped")
    func domainSeparation() {
        let meshText = MeshKey.generate().fileContents().trimmingCharacters()
        expectInvalid(meshText)
        expectInvalid("weft1" + meshText.dropFirst("weftmesh1".count))
    }
}

extension String {
    fileprivate func trimmingCharacters() -> String { String(trimmingWhitespace()) }
}
