/// A packet read from a capture file.
public struct CapturedPacket: Sendable {
    /// Nanoseconds since the Unix epoch (at the capture's own resolution).
    public var timestamp: Int64
    /// The link-layer header type (LINKTYPE_*, as tcpdump.org lists them).
    public var linkType: UInt32
    /// The bytes captured (perhaps fewer than the packet had: `originalLength`).
    public var data: ArraySlice<UInt8>
    public var originalLength: Int
    /// Where the packet's record starts in the file.
    public var fileOffset: Int
}

/// Reads pcap and pcapng files (as tcpdump and Wireshark write them) as bytes are fed in, in
/// any pieces: sans-I/O, so a file, a pipe or a test can drive it.
///
/// pcap: either byte order, microsecond or nanosecond timestamps. pcapng: section header,
/// interface description, enhanced and simple packet blocks (any other block is skipped),
/// several sections and interfaces, either byte order, `if_tsresol`.
///
/// A damaged record is reported (`CaptureError` with its offset) and reading goes on where it
/// can: pcapng blocks carry their length, so a block that does not parse is skipped; a pcap
/// record whose length cannot be right ends the file, as nothing after it can be found.
public struct CaptureFileDecoder: Sendable {
    private var buffer: [UInt8] = []
    /// Where `buffer[start]` is in the input.
    private var start = 0
    private var consumedInBuffer = 0
    private var format: Format = .unknown
    private var ended = false

    private enum Format: Sendable {
        case unknown
        case pcap(bigEndian: Bool, nanoseconds: Bool, linkType: UInt32)
        case pcapng(bigEndian: Bool, interfaces: [Interface])
    }

    private struct Interface: Sendable {
        var linkType: UInt32
        /// Timestamp units per second.
        var unitsPerSecond: UInt64
    }

    /// The largest record Weft reads (a jumbo frame is far smaller).
    static let maxRecordByteCount = 1 << 24

    public init() {}

    /// Adds bytes of the file, following those fed before.
    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        if consumedInBuffer > 0 && consumedInBuffer >= buffer.count / 2 {
            buffer.removeFirst(consumedInBuffer)
            start += consumedInBuffer
            consumedInBuffer = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Bytes fed and not yet read as records.
    public var unreadByteCount: Int { buffer.count - consumedInBuffer }

    /// The next packet, nil when more bytes are needed. Throws for damage (reading goes on
    /// with the next call where it can; `isEnded` says when it cannot).
    public mutating func next() throws(CaptureError) -> CapturedPacket? {
        while !ended {
            switch format {
            case .unknown:
                guard try readFileHeader() else { return nil }
            case .pcap(let bigEndian, let nanoseconds, let linkType):
                return try readPcapRecord(bigEndian: bigEndian, nanoseconds: nanoseconds, linkType: linkType)
            case .pcapng:
                guard let result = try readPcapngBlock() else { return nil }
                if let packet = result { return packet }
            }
        }
        return nil
    }

    /// Whether reading stopped for good (a pcap record that cannot be skipped, or no capture).
    public var isEnded: Bool { ended }

    /// At the end of the input: throws if bytes were left that are not a whole record.
    public func finish() throws(CaptureError) {
        guard !ended, unreadByteCount > 0 else { return }
        throw CaptureError(offset: start + consumedInBuffer, "the capture ends inside a record (\(unreadByteCount) bytes left over): it was cut short")
    }

    // MARK: - Reading fields

    private func available(_ count: Int) -> Bool { buffer.count - consumedInBuffer >= count }

    private func u32(at position: Int, bigEndian: Bool) -> UInt32 {
        let b = buffer[(consumedInBuffer + position)..<(consumedInBuffer + position + 4)]
        let value = b.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return bigEndian ? value : value.byteSwapped
    }

    private func u16(at position: Int, bigEndian: Bool) -> UInt16 {
        let high = UInt16(buffer[consumedInBuffer + position]), low = UInt16(buffer[consumedInBuffer + position + 1])
        let value = high << 8 | low
        return bigEndian ? value : value.byteSwapped
    }

    private var offset: Int { start + consumedInBuffer }

    // MARK: - File header

    private mutating func readFileHeader() throws(CaptureError) -> Bool {
        guard available(4) else { return false }
        let magic = u32(at: 0, bigEndian: true)
        switch magic {
        case 0xa1b2_c3d4, 0xd4c3_b2a1, 0xa1b2_3c4d, 0x4d3c_b2a1:
            guard available(24) else { return false }
            let bigEndian = magic == 0xa1b2_c3d4 || magic == 0xa1b2_3c4d
            let nanoseconds = magic == 0xa1b2_3c4d || magic == 0x4d3c_b2a1
            let linkType = u32(at: 20, bigEndian: bigEndian) & 0x0fff_ffff
            consumedInBuffer += 24
            format = .pcap(bigEndian: bigEndian, nanoseconds: nanoseconds, linkType: linkType)
            return true
        case 0x0a0d_0d0a:
            format = .pcapng(bigEndian: false, interfaces: [])
            return true
        default:
            ended = true
            throw CaptureError(offset: offset, "not a pcap or pcapng capture: it starts with \(hex32(magic))")
        }
    }

    // MARK: - pcap

    private mutating func readPcapRecord(bigEndian: Bool, nanoseconds: Bool, linkType: UInt32) throws(CaptureError) -> CapturedPacket? {
        guard available(16) else { return nil }
        let seconds = u32(at: 0, bigEndian: bigEndian), fraction = u32(at: 4, bigEndian: bigEndian)
        let captured = Int(u32(at: 8, bigEndian: bigEndian)), original = Int(u32(at: 12, bigEndian: bigEndian))
        guard captured <= Self.maxRecordByteCount else {
            ended = true
            throw CaptureError(offset: offset, "a pcap record claims \(captured) captured bytes, more than any packet; nothing after it can be read")
        }
        guard available(16 + captured) else { return nil }
        let first = consumedInBuffer + 16
        let packet = CapturedPacket(
            timestamp: Int64(seconds) * 1_000_000_000 + Int64(fraction) * (nanoseconds ? 1 : 1000), linkType: linkType,
            data: buffer[first..<(first + captured)], originalLength: original, fileOffset: offset)
        consumedInBuffer += 16 + captured
        return packet
    }

    // MARK: - pcapng

    /// nil: more bytes needed; .some(nil): a block that holds no packet.
    private mutating func readPcapngBlock() throws(CaptureError) -> CapturedPacket?? {
        guard case .pcapng(var bigEndian, var interfaces) = format else { return nil }
        guard available(12) else { return nil }
        let type = u32(at: 0, bigEndian: true)
        if type == 0x0a0d_0d0a {
            // A section header: its byte-order magic sets the order of everything in it.
            let order = u32(at: 8, bigEndian: true)
            guard order == 0x1a2b_3c4d || order == 0x4d3c_2b1a else {
                ended = true
                throw CaptureError(offset: offset, "a pcapng section header with byte-order magic \(hex32(order))")
            }
            bigEndian = order == 0x1a2b_3c4d
            interfaces = []
        }
        let blockType = u32(at: 0, bigEndian: bigEndian)
        let length = Int(u32(at: 4, bigEndian: bigEndian))
        guard length >= 12, length % 4 == 0, length <= Self.maxRecordByteCount else {
            ended = true
            throw CaptureError(offset: offset, "a pcapng block of type \(blockType) claims \(length) bytes; nothing after it can be read")
        }
        guard available(length) else {
            format = .pcapng(bigEndian: bigEndian, interfaces: interfaces)
            return nil
        }
        let blockOffset = offset
        defer {
            consumedInBuffer += length
            format = .pcapng(bigEndian: bigEndian, interfaces: interfaces)
        }
        guard u32(at: length - 4, bigEndian: bigEndian) == UInt32(length) else {
            throw CaptureError(offset: blockOffset, "a pcapng block's trailing length does not repeat its length \(length); the block is skipped")
        }
        switch blockType {
        case 0x0a0d_0d0a:
            return .some(nil)
        case 1:  // interface description
            guard length >= 20 else { throw CaptureError(offset: blockOffset, "an interface description block of \(length) bytes") }
            var interface = Interface(linkType: UInt32(u16(at: 8, bigEndian: bigEndian)), unitsPerSecond: 1_000_000)
            // Options: if_tsresol (9) changes the timestamp unit.
            var position = 16
            while position + 4 <= length - 4 {
                let code = u16(at: position, bigEndian: bigEndian), size = Int(u16(at: position + 2, bigEndian: bigEndian))
                if code == 0 || position + 4 + size > length - 4 { break }
                if code == 9, size >= 1 {
                    let value = buffer[consumedInBuffer + position + 4]
                    // 10^n or 2^n units a second; beyond nanoseconds (n > 9, or 2^n > 2^30) is read as nanoseconds' worth.
                    let exponent = Int(value & 0x7f)
                    interface.unitsPerSecond = value & 0x80 == 0
                        ? (0..<min(exponent, 18)).reduce(UInt64(1)) { unit, _ in unit * 10 }
                        : UInt64(1) << UInt64(min(exponent, 62))
                }
                position += 4 + (size + 3) / 4 * 4
            }
            interfaces.append(interface)
            return .some(nil)
        case 6:  // enhanced packet
            guard length >= 32 else { throw CaptureError(offset: blockOffset, "an enhanced packet block of \(length) bytes") }
            let index = Int(u32(at: 8, bigEndian: bigEndian))
            guard interfaces.indices.contains(index) else {
                throw CaptureError(offset: blockOffset, "a packet on interface \(index), which no interface description block named")
            }
            let stamp = UInt64(u32(at: 12, bigEndian: bigEndian)) << 32 | UInt64(u32(at: 16, bigEndian: bigEndian))
            let captured = Int(u32(at: 20, bigEndian: bigEndian)), original = Int(u32(at: 24, bigEndian: bigEndian))
            guard 28 + captured <= length - 4 else {
                throw CaptureError(offset: blockOffset, "an enhanced packet block claims \(captured) captured bytes in \(length)")
            }
            let first = consumedInBuffer + 28
            return .some(CapturedPacket(
                timestamp: Self.nanoseconds(stamp, unitsPerSecond: interfaces[index].unitsPerSecond), linkType: interfaces[index].linkType,
                data: buffer[first..<(first + captured)], originalLength: original, fileOffset: blockOffset))
        case 3:  // simple packet: interface 0, no timestamp
            guard let interface = interfaces.first, length >= 16 else {
                throw CaptureError(offset: blockOffset, "a simple packet block before any interface description")
            }
            let original = Int(u32(at: 8, bigEndian: bigEndian))
            let captured = min(original, length - 16)
            let first = consumedInBuffer + 12
            return .some(CapturedPacket(
                timestamp: 0, linkType: interface.linkType, data: buffer[first..<(first + captured)], originalLength: original,
                fileOffset: blockOffset))
        default:
            return .some(nil)
        }
    }
}

extension CaptureFileDecoder {
    /// A pcapng timestamp in nanoseconds, exactly where the units allow.
    static func nanoseconds(_ stamp: UInt64, unitsPerSecond: UInt64) -> Int64 {
        let seconds = stamp / unitsPerSecond, fraction = stamp % unitsPerSecond
        let (product, overflow) = fraction.multipliedReportingOverflow(by: 1_000_000_000)
        let nanoseconds = overflow ? UInt64(Double(fraction) / Double(unitsPerSecond) * 1e9) : product / unitsPerSecond
        return Int64(clamping: seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue &+ nanoseconds)
    }
}

/// `0a0d0d0a`.
func hex32(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 8 - digits.count) + digits
}
