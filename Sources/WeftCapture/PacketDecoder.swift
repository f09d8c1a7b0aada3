/// An IP address as captured: 4 bytes (IPv4) or 16 (IPv6).
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// `127.0.0.1`, or IPv6 as eight groups of hex (`0:0:0:0:0:0:0:1`).
    public var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: bytes.count, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}

/// One end of a TCP or UDP flow.
public struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    public let port: UInt16

    public init(address: IPAddress, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// `127.0.0.1:4000`, `[0:0:0:0:0:0:0:1]:4000`.
    public var description: String { address.bytes.count == 4 ? "\(address):\(port)" : "[\(address)]:\(port)" }
}

/// A TCP segment out of a captured packet.
public struct TCPSegment: Sendable {
    public var source: Endpoint
    public var destination: Endpoint
    public var sequence: UInt32
    public var acknowledgement: UInt32
    public var flags: Flags
    public var payload: ArraySlice<UInt8>

    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let fin = Flags(rawValue: 0x01)
        public static let syn = Flags(rawValue: 0x02)
        public static let rst = Flags(rawValue: 0x04)
        public static let ack = Flags(rawValue: 0x10)
    }
}

/// A UDP datagram out of a captured packet.
public struct UDPDatagram: Sendable {
    public var source: Endpoint
    public var destination: Endpoint
    public var payload: ArraySlice<UInt8>
}

/// What a captured packet holds, as far as Weft looks.
public enum DecodedPacket: Sendable {
    case tcp(TCPSegment)
    case udp(UDPDatagram)
    /// Anything else (ARP, ICMP, fragments, other link types), and why it is not read.
    case other(String)
}

/// Takes captured packets apart down to TCP and UDP: link layers Ethernet (1, as
/// `tcpdump -i lo` writes on Linux), BSD loopback (0), raw IP (101, 228, 229), Linux cooked
/// (113, 276; `-i any`); IPv4 (options skipped; fragments not reassembled) and IPv6 (extension
/// headers skipped).
public enum PacketDecoder {
    public static func decode(_ packet: CapturedPacket) throws(CaptureError) -> DecodedPacket {
        let data = packet.data
        let base = data.startIndex
        func fail(_ reason: String) -> CaptureError { CaptureError(offset: packet.fileOffset, reason) }
        var ethertype: UInt16
        var position: Int
        switch packet.linkType {
        case 1:
            guard data.count >= 14 else { throw fail("an Ethernet frame of \(data.count) bytes") }
            ethertype = UInt16(data[base + 12]) << 8 | UInt16(data[base + 13])
            position = 14
            while ethertype == 0x8100 || ethertype == 0x88a8 {  // VLAN tags
                guard data.count >= position + 4 else { throw fail("a VLAN tag cut short") }
                ethertype = UInt16(data[base + position + 2]) << 8 | UInt16(data[base + position + 3])
                position += 4
            }
        case 0:
            guard data.count >= 4 else { throw fail("a loopback header cut short") }
            let family = UInt32(data[base]) | UInt32(data[base + 1]) << 8 | UInt32(data[base + 2]) << 16 | UInt32(data[base + 3]) << 24
            ethertype = family == 2 ? 0x0800 : 0x86dd
            position = 4
        case 101, 228, 229:
            guard let first = data.first else { throw fail("an empty packet") }
            ethertype = first >> 4 == 6 ? 0x86dd : 0x0800
            position = 0
        case 113:
            guard data.count >= 16 else { throw fail("a Linux cooked header cut short") }
            ethertype = UInt16(data[base + 14]) << 8 | UInt16(data[base + 15])
            position = 16
        case 276:
            guard data.count >= 20 else { throw fail("a Linux cooked (v2) header cut short") }
            ethertype = UInt16(data[base]) << 8 | UInt16(data[base + 1])
            position = 20
        default:
            return .other("link type \(packet.linkType)")
        }
        return try decodeIP(data, at: base + position, ethertype: ethertype, fail: fail)
    }

    private static func decodeIP(
        _ data: ArraySlice<UInt8>, at start: Int, ethertype: UInt16, fail: (String) -> CaptureError
    ) throws(CaptureError) -> DecodedPacket {
        let end = data.endIndex
        var position = start
        let source: IPAddress, destination: IPAddress
        var proto: UInt8
        var payloadEnd: Int
        switch ethertype {
        case 0x0800:
            guard end - position >= 20 else { throw fail("an IPv4 header cut short") }
            let headerLength = Int(data[position] & 0x0f) * 4
            let totalLength = Int(data[position + 2]) << 8 | Int(data[position + 3])
            guard headerLength >= 20, end - position >= headerLength else { throw fail("an IPv4 header of \(headerLength) bytes") }
            let fragment = (Int(data[position + 6]) << 8 | Int(data[position + 7])) & 0x3fff
            if fragment != 0 { return .other("an IPv4 fragment") }
            proto = data[position + 9]
            source = IPAddress(Array(data[(position + 12)..<(position + 16)]))
            destination = IPAddress(Array(data[(position + 16)..<(position + 20)]))
            // A total length of 0 is what TCP segmentation offload leaves: the packet's end.
            payloadEnd = totalLength == 0 ? end : min(end, position + totalLength)
            position += headerLength
        case 0x86dd:
            guard end - position >= 40 else { throw fail("an IPv6 header cut short") }
            let payloadLength = Int(data[position + 4]) << 8 | Int(data[position + 5])
            proto = data[position + 6]
            source = IPAddress(Array(data[(position + 8)..<(position + 24)]))
            destination = IPAddress(Array(data[(position + 24)..<(position + 40)]))
            position += 40
            payloadEnd = payloadLength == 0 ? end : min(end, position + payloadLength)
            // Extension headers: hop-by-hop, routing, destination options.
            while proto == 0 || proto == 43 || proto == 60 {
                guard payloadEnd - position >= 8 else { throw fail("an IPv6 extension header cut short") }
                proto = data[position]
                position += (Int(data[position + 1]) + 1) * 8
            }
            if proto == 44 { return .other("an IPv6 fragment") }
        default:
            return .other("ethertype \(String(ethertype, radix: 16))")
        }
        guard position <= payloadEnd else { throw fail("an IP packet shorter than its header") }
        switch proto {
        case 6:
            guard payloadEnd - position >= 20 else { throw fail("a TCP header cut short") }
            let offset = Int(data[position + 12] >> 4) * 4
            guard offset >= 20, payloadEnd - position >= offset else { throw fail("a TCP header of \(offset) bytes") }
            func u32(_ at: Int) -> UInt32 {
                UInt32(data[at]) << 24 | UInt32(data[at + 1]) << 16 | UInt32(data[at + 2]) << 8 | UInt32(data[at + 3])
            }
            return .tcp(TCPSegment(
                source: Endpoint(address: source, port: UInt16(data[position]) << 8 | UInt16(data[position + 1])),
                destination: Endpoint(address: destination, port: UInt16(data[position + 2]) << 8 | UInt16(data[position + 3])),
                sequence: u32(position + 4), acknowledgement: u32(position + 8),
                flags: TCPSegment.Flags(rawValue: data[position + 13] & 0x17),
                payload: data[(position + offset)..<payloadEnd]))
        case 17:
            guard payloadEnd - position >= 8 else { throw fail("a UDP header cut short") }
            return .udp(UDPDatagram(
                source: Endpoint(address: source, port: UInt16(data[position]) << 8 | UInt16(data[position + 1])),
                destination: Endpoint(address: destination, port: UInt16(data[position + 2]) << 8 | UInt16(data[position + 3])),
                payload: data[(position + 8)..<payloadEnd]))
        default:
            return .other("IP protocol \(proto)")
        }
    }
}
