extension DNSMessage {
    /// The message on the wire (RFC 1035 §4), names compressed (§4.1.4): where a name ends
    /// with labels already written, a pointer to them replaces those labels.
    public func encoded() -> [UInt8] { encoded(compressingNames: true) }

    /// `compressingNames: false` writes every name out (for tests and for looking at packets).
    func encoded(compressingNames: Bool) -> [UInt8] {
        var writer = DNSWriter(compressing: compressingNames)
        writer.u16(id)
        writer.u16(flags)
        for count in [questions.count, answers.count, authorities.count, additionals.count] { writer.u16(UInt16(clamping: count)) }
        for question in questions {
            writer.name(question.name)
            writer.u16(question.type)
            writer.u16(question.recordClass | (question.unicastResponse ? Self.topClassBit : 0))
        }
        for record in answers + authorities + additionals { writer.record(record) }
        return writer.bytes
    }
}

/// Builds a message's bytes, remembering where each name suffix was written.
struct DNSWriter {
    let compressing: Bool
    private(set) var bytes: [UInt8] = []
    /// Folded name suffixes already written, and where: a pointer holds 14 bits of offset.
    private var suffixes: [[[UInt8]]: Int] = [:]
    private static let pointerLimit = 0x4000

    init(compressing: Bool = true) { self.compressing = compressing }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: UInt16) { bytes += [UInt8(value >> 8), UInt8(value & 0xff)] }
    mutating func u32(_ value: UInt32) { u16(UInt16(value >> 16)); u16(UInt16(value & 0xffff)) }

    mutating func name(_ name: DNSName, compressed: Bool = true) {
        let folded = name.folded
        for index in name.labels.indices {
            let suffix = Array(folded[index...])
            if compressed, compressing, let offset = suffixes[suffix] {
                u16(0xc000 | UInt16(offset))
                return
            }
            if bytes.count < Self.pointerLimit, suffixes[suffix] == nil { suffixes[suffix] = bytes.count }
            u8(UInt8(name.labels[index].count))
            bytes += name.labels[index]
        }
        u8(0)
    }

    mutating func record(_ record: DNSResourceRecord) {
        name(record.name)
        u16(record.type)
        u16(record.recordClass | (record.cacheFlush ? DNSMessage.topClassBit : 0))
        u32(record.ttl)
        let lengthAt = bytes.count
        u16(0)
        switch record.data {
        case .a(let address), .aaaa(let address):
            bytes += address
        case .ptr(let target):
            name(target)
        case .srv(let priority, let weight, let port, let target):
            u16(priority)
            u16(weight)
            u16(port)
            name(target)
        case .txt(let strings):
            // An empty TXT record still holds one empty string (RFC 6763 §6.1).
            for string in strings.isEmpty ? [[]] : strings {
                u8(UInt8(min(string.count, 255)))
                bytes += string.prefix(255)
            }
        case .nsec(let next, let types):
            // The next name is never compressed (RFC 4034 §4.1.1).
            name(next, compressed: false)
            for (window, bitmap) in Self.typeBitmaps(types) {
                u8(window)
                u8(UInt8(bitmap.count))
                bytes += bitmap
            }
        case .other(_, let data):
            bytes += data
        }
        let length = UInt16(clamping: bytes.count - lengthAt - 2)
        bytes[lengthAt] = UInt8(length >> 8)
        bytes[lengthAt + 1] = UInt8(length & 0xff)
    }

    /// NSEC's type bitmap: per window of 256 types, the bytes up to the last one set.
    static func typeBitmaps(_ types: [UInt16]) -> [(UInt8, [UInt8])] {
        var windows: [UInt8: [UInt8]] = [:]
        for type in Set(types) {
            let window = UInt8(type >> 8)
            let bit = Int(type & 0xff)
            var bitmap = windows[window] ?? []
            if bitmap.count <= bit / 8 { bitmap += [UInt8](repeating: 0, count: bit / 8 + 1 - bitmap.count) }
            bitmap[bit / 8] |= 0x80 >> UInt8(bit % 8)
            windows[window] = bitmap
        }
        return windows.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}
