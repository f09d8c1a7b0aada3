import WeftCrypto
@testable import WeftModel

/// Writes operation bytes field by field from SPEC.md §12.1, without the model's encoder, so
/// tests can build encodings the model would never write (unsorted, duplicated, truncated).
struct RawWriter {
    private(set) var bytes: [UInt8] = []

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: Int) { bytes += [UInt8(value >> 8 & 0xff), UInt8(value & 0xff)] }
    mutating func u32(_ value: Int) { for shift in [24, 16, 8, 0] { bytes.append(UInt8(value >> shift & 0xff)) } }
    mutating func u64(_ value: UInt64) { for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(value >> UInt64(shift) & 0xff)) } }
    mutating func raw(_ value: [UInt8]) { bytes += value }
    /// `u16 length || bytes`: text, given as the bytes it is made of (which need not be UTF-8).
    mutating func text(_ value: [UInt8]) {
        u16(value.count)
        bytes += value
    }
    mutating func text(_ value: String) { text(Array(value.utf8)) }
    mutating func blob(_ value: [UInt8]) {
        u32(value.count)
        bytes += value
    }
    /// A list of fixed-size items: `u16 count || items`.
    mutating func list(_ items: [[UInt8]]) {
        u16(items.count)
        for item in items { bytes += item }
    }
}

/// An operation's fields as bytes.
struct RawOperation {
    var version: UInt8 = 1
    var kind: UInt8
    var author: [UInt8]
    var conversation: [UInt8]
    var sequence: UInt64
    var timestamp: UInt64
    var causes: [[UInt8]]
    var body: [UInt8]
    /// Bytes after the body blob (none in a canonical encoding).
    var trailing: [UInt8] = []

    init(_ op: Operation) {
        let encoding = op.encoded()
        kind = op.body.kind
        author = op.author.bytes
        conversation = op.conversation.bytes
        sequence = op.sequence
        timestamp = op.timestamp.rawValue
        causes = op.causes.map(\.bytes)
        // The body blob is the rest of the encoding after the header and causes.
        let bodyStart = 1 + 1 + 32 + 16 + 8 + 8 + 2 + 32 * op.causes.count + 4
        body = Array(encoding[bodyStart...])
    }

    var encoding: [UInt8] {
        var w = RawWriter()
        w.u8(version)
        w.u8(kind)
        w.raw(author)
        w.raw(conversation)
        w.u64(sequence)
        w.u64(timestamp)
        w.list(causes)
        w.blob(body)
        w.raw(trailing)
        return w.bytes
    }

    var id: [UInt8] { BLAKE2b.hash(encoding, outputByteCount: 32) }

    /// The wire form signed by `identity`: `blob(encoding) || signature`.
    func wire(signedBy identity: NodeIdentity) -> [UInt8] {
        var w = RawWriter()
        w.blob(encoding)
        w.raw(identity.sign(Array("weft operation v1".utf8) + id))
        return w.bytes
    }
}
