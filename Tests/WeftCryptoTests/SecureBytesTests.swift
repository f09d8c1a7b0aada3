import Testing
@testable import WeftCrypto

@Suite("SecureBytes")
struct SecureBytesTests {
    private func bytes(_ secret: SecureBytes) -> [UInt8] { secret.withUnsafeBytes { [UInt8]($0) } }

    @Test("equality compares contents, not storage")
    func equalityByContent() {
        let a = SecureBytes(copying: [1, 2, 3, 4] as [UInt8])
        let b = SecureBytes(copying: [1, 2, 3, 4] as [UInt8])
        #expect(a == b)
        #expect(a == a)
        #expect(a != SecureBytes(copying: [1, 2, 3, 5] as [UInt8]))
        #expect(a != SecureBytes(copying: [1, 2, 3] as [UInt8]), "a prefix is not equal")
        #expect(a != SecureBytes(copying: [1, 2, 3, 4, 0] as [UInt8]), "a longer secret is not equal")
        #expect(SecureBytes(copying: [UInt8]()) == SecureBytes(copying: [UInt8]()))
    }

    @Test("init(count:fill:) keeps what fill wrote")
    func fillInPlace() {
        let secret = SecureBytes(count: 5) { buffer in
            for i in buffer.indices { buffer[i] = UInt8(i * 3) }
        }
        #expect(secret.count == 5)
        #expect(bytes(secret) == [0, 3, 6, 9, 12])
    }

    @Test("description never shows the bytes")
    func descriptionIsRedacted() {
        let content: [UInt8] = [0xde, 0xad, 0xbe, 0xef, 0x42, 0x13, 0x37, 0x99]
        let secret = SecureBytes(copying: content)
        let text = secret.description
        #expect(text.contains("8 bytes"))
        #expect(text.contains("redacted"))
        for rendering in [content.hex, "dead", "beef", "4213", "3799", "222", "173", "190", "239", "0x"] {
            #expect(!text.lowercased().contains(rendering), "description leaks \(rendering)")
        }
        #expect("\(secret)" == text)
        #expect(String(describing: [secret]).contains("redacted"))
    }

    @Test("prefix copies the leading bytes", arguments: [0, 1, 16, 31, 32])
    func prefix(length: Int) {
        let content = (0..<32).map { UInt8($0 + 100) }
        let secret = SecureBytes(copying: content)
        let prefix = secret.prefix(length)
        #expect(prefix.count == length)
        #expect(bytes(prefix) == Array(content.prefix(length)))
        #expect(bytes(secret) == content, "the original is unchanged")
    }

    @Test("random secrets have the right length, are not all zero, and differ")
    func randomness() {
        let a = SecureBytes.random(count: 32)
        let b = SecureBytes.random(count: 32)
        #expect(a.count == 32)
        #expect(bytes(a).contains { $0 != 0 })
        #expect(bytes(b).contains { $0 != 0 })
        #expect(a != b)
        #expect(SecureBytes.random(count: 0).count == 0)
        #expect(secureRandomBytes(64) != secureRandomBytes(64))
    }

    @Test("constantTimeEquals compares contents and lengths")
    func constantTime() {
        #expect(constantTimeEquals([1, 2, 3] as [UInt8], [1, 2, 3] as [UInt8]))
        #expect(!constantTimeEquals([1, 2, 3] as [UInt8], [1, 2, 4] as [UInt8]))
        #expect(!constantTimeEquals([1, 2, 3] as [UInt8], [1, 2] as [UInt8]))
        #expect(constantTimeEquals([UInt8](), [UInt8]()))
        #expect(constantTimeEquals(SecureBytes(copying: [9, 9] as [UInt8]), [9, 9] as [UInt8]))
    }
}
