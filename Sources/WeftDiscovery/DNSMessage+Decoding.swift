extension DNSMessage {
    /// Reads a whole message. Anything that does not parse throws `DNSMessageError`; nothing
    /// a sender puts in the packet makes the reader loop or read outside it: every count and
    /// length is checked against the bytes left, and a compression pointer must point before
    /// every byte the name has used so far, so a chain of them ends.
    public init(decoding bytes: [UInt8]) throws(DNSMessageError) {
        var reader = DNSReader(bytes: bytes)
        let id = try reader.u16("the header")
        let flags = try reader.u16("the header")
        let counts = [try reader.u16("the header"), try reader.u16("the header"), try reader.u16("the header"), try reader.u16("the header")]
        var questions: [DNSQuestion] = []
        for _ in 0..<counts[0] {
            let name = try reader.name()
            let type = try reader.u16("a question")
            let recordClass = try reader.u16("a question")
            questions.append(DNSQuestion(
                name, type: type, unicastResponse: recordClass & Self.topClassBit != 0, recordClass: recordClass & ~Self.topClassBit))
        }
        var sections: [[DNSResourceRecord]] = []
        for count in counts.dropFirst() {
            var records: [DNSResourceRecord] = []
            for _ in 0..<count { records.append(try reader.record()) }
            sections.append(records)
        }
        guard reader.isAtEnd else { throw DNSMessageError(.badRecord, "\(reader.remaining) bytes after the last record") }
        self.init(
            id: id, isResponse: flags & Self.responseBit != 0, isAuthoritative: flags & Self.authoritativeBit != 0,
            isTruncated: flags & Self.truncatedBit != 0, otherFlags: flags, questions: questions,
            answers: sections[0], authorities: sections[1], additionals: sections[2])
    }
}

/// Reads fields from a message's bytes; names may point anywhere before them.
struct DNSReader {
    let bytes: [UInt8]
    private(set) var offset = 0
    /// Where the current record's data ends (reads of it stop there).
    private var end: Int

    init(bytes: [UInt8]) {
        self.bytes = bytes
        end = bytes.count
    }

    var isAtEnd: Bool { offset == bytes.count }
    var remaining: Int { bytes.count - offset }

    mutating func u8(_ what: String) throws(DNSMessageError) -> UInt8 {
        guard offset < end else { throw DNSMessageError(.truncated, "\(what) runs past the end of the packet") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16(_ what: String) throws(DNSMessageError) -> UInt16 {
        UInt16(try u8(what)) << 8 | UInt16(try u8(what))
    }

    mutating func u32(_ what: String) throws(DNSMessageError) -> UInt32 {
        UInt32(try u16(what)) << 16 | UInt32(try u16(what))
    }

    mutating func take(_ count: Int, _ what: String) throws(DNSMessageError) -> [UInt8] {
        guard count <= end - offset else { throw DNSMessageError(.truncated, "\(what) runs past the end of the packet") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// A name at the current offset, following compression pointers.
    mutating func name() throws(DNSMessageError) -> DNSName {
        var labels: [[UInt8]] = []
        var wireLength = 1
        var position = offset
        // Every pointer must point before this: the lowest byte the name has used so far.
        var lowest = offset
        var resumeAt: Int?
        while true {
            guard position < (resumeAt == nil ? end : bytes.count) else {
                throw DNSMessageError(.truncated, "a name runs past the end of the packet")
            }
            let length = bytes[position]
            switch length & 0xc0 {
            case 0x00:
                if length == 0 {
                    offset = resumeAt ?? position + 1
                    return try DNSName(labels: labels)
                }
                let start = position + 1
                guard start + Int(length) <= (resumeAt == nil ? end : bytes.count) else {
                    throw DNSMessageError(.truncated, "a label runs past the end of the packet")
                }
                wireLength += 1 + Int(length)
                guard wireLength <= DNSName.maxByteCount else { throw DNSMessageError(.badName, "a name over \(DNSName.maxByteCount) bytes") }
                labels.append(Array(bytes[start..<start + Int(length)]))
                position = start + Int(length)
            case 0xc0:
                guard position + 1 < bytes.count else { throw DNSMessageError(.truncated, "a pointer runs past the end of the packet") }
                let target = Int(length & 0x3f) << 8 | Int(bytes[position + 1])
                guard target < lowest else { throw DNSMessageError(.badPointer, "a pointer to \(target) from \(position) does not point back") }
                if resumeAt == nil { resumeAt = position + 2 }
                lowest = target
                position = target
            default:
                throw DNSMessageError(.badName, "the label kind \(length >> 6) is not assigned")
            }
        }
    }

    mutating func record() throws(DNSMessageError) -> DNSResourceRecord {
        let name = try name()
        let type = try u16("a record")
        let recordClass = try u16("a record")
        let ttl = try u32("a record")
        let length = Int(try u16("a record"))
        guard length <= end - offset else { throw DNSMessageError(.truncated, "record data of \(length) bytes runs past the end of the packet") }
        let start = offset
        let outer = end
        end = offset + length
        defer { end = outer }
        let data: DNSRecordData
        switch type {
        case DNSRecordType.a, DNSRecordType.aaaa:
            let size = type == DNSRecordType.a ? 4 : 16
            guard length == size else { throw DNSMessageError(.badRecord, "an address record of \(length) bytes, not \(size)") }
            let address = try take(size, "an address")
            data = type == DNSRecordType.a ? .a(address) : .aaaa(address)
        case DNSRecordType.ptr:
            data = .ptr(try self.name())
        case DNSRecordType.srv:
            data = .srv(priority: try u16("SRV"), weight: try u16("SRV"), port: try u16("SRV"), target: try self.name())
        case DNSRecordType.txt:
            var strings: [[UInt8]] = []
            while offset < end { strings.append(try take(Int(try u8("TXT")), "a TXT string")) }
            data = .txt(strings == [[]] ? [] : strings)
        case DNSRecordType.nsec:
            let next = try self.name()
            var types: [UInt16] = []
            while offset < end {
                let window = try u8("an NSEC bitmap")
                let count = Int(try u8("an NSEC bitmap"))
                guard (1...32).contains(count) else { throw DNSMessageError(.badRecord, "an NSEC bitmap of \(count) bytes (1 to 32)") }
                for (index, byte) in try take(count, "an NSEC bitmap").enumerated() {
                    for bit in 0..<8 where byte & (0x80 >> UInt8(bit)) != 0 {
                        types.append(UInt16(window) << 8 | UInt16(index * 8 + bit))
                    }
                }
            }
            data = .nsec(next: next, types: types)
        default:
            data = .other(type: type, data: try take(length, "record data"))
        }
        guard offset == start + length else {
            throw DNSMessageError(.badRecord, "record data of type \(type) holds \(start + length - offset) bytes more than it says")
        }
        return DNSResourceRecord(
            name, data, ttl: ttl, cacheFlush: recordClass & DNSMessage.topClassBit != 0, recordClass: recordClass & ~DNSMessage.topClassBit)
    }
}
