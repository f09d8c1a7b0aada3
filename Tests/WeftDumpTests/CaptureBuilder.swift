@testable import WeftCapture

/// Builds captures byte by byte as tcpdump writes them, for the tests: Ethernet + IPv4 + TCP
/// packets in pcap (either byte order) or pcapng files.
enum CaptureBuilder {
    static let alice = Endpoint(address: IPAddress([127, 0, 0, 1]), port: 40_000)
    static let bob = Endpoint(address: IPAddress([127, 0, 0, 2]), port: 7_000)

    static func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xff), UInt8(value & 0xff)] }
    static func be32(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)] }
    static func le32(_ value: UInt32) -> [UInt8] { be32(value).reversed() }
    static func le16(_ value: Int) -> [UInt8] { be16(value).reversed() }

    /// An Ethernet frame holding an IPv4 TCP segment.
    static func tcp(
        from source: Endpoint, to destination: Endpoint, sequence: UInt32, acknowledgement: UInt32 = 0,
        flags: TCPSegment.Flags = .ack, payload: [UInt8] = []
    ) -> [UInt8] {
        let tcpHeader = be16(Int(source.port)) + be16(Int(destination.port)) + be32(sequence) + be32(acknowledgement)
            + [0x50, flags.rawValue] + be16(65535) + [0, 0, 0, 0]
        let totalLength = 20 + tcpHeader.count + payload.count
        let ip: [UInt8] = [0x45, 0] + be16(totalLength) + [0, 0, 0x40, 0, 64, 6, 0, 0] + source.address.bytes + destination.address.bytes
        return [UInt8](repeating: 0, count: 12) + [0x08, 0x00] + ip + tcpHeader + payload
    }

    /// A UDP datagram in an Ethernet frame.
    static func udp(from source: Endpoint, to destination: Endpoint, payload: [UInt8]) -> [UInt8] {
        let udpHeader = be16(Int(source.port)) + be16(Int(destination.port)) + be16(8 + payload.count) + [0, 0]
        let ip: [UInt8] = [0x45, 0] + be16(20 + 8 + payload.count) + [0, 0, 0x40, 0, 64, 17, 0, 0] + source.address.bytes + destination.address.bytes
        return [UInt8](repeating: 0, count: 12) + [0x08, 0x00] + ip + udpHeader + payload
    }

    /// A classic pcap file (microseconds) of Ethernet frames, one a millisecond.
    static func pcap(_ frames: [[UInt8]], bigEndian: Bool = false) -> [UInt8] {
        let u32 = bigEndian ? be32 : le32
        let u16 = bigEndian ? be16 : le16
        var file = u32(0xa1b2_c3d4) + u16(2) + u16(4) + u32(0) + u32(0) + u32(262_144) + u32(1)
        for (index, frame) in frames.enumerated() {
            file += u32(1_700_000_000) + u32(UInt32(index * 1000)) + u32(UInt32(frame.count)) + u32(UInt32(frame.count)) + frame
        }
        return file
    }

    /// A pcapng file (little-endian, nanosecond `if_tsresol`) of Ethernet frames, with an
    /// unknown block between packets as writers add (name resolution, statistics).
    static func pcapng(_ frames: [[UInt8]]) -> [UInt8] {
        func block(_ type: UInt32, _ body: [UInt8]) -> [UInt8] {
            let padded = body + [UInt8](repeating: 0, count: (4 - body.count % 4) % 4)
            let length = UInt32(12 + padded.count)
            return le32(type) + le32(length) + padded + le32(length)
        }
        var file = block(0x0a0d_0d0a, le32(0x1a2b_3c4d) + le16(1) + le16(0) + [UInt8](repeating: 0xff, count: 8))
        // Interface: Ethernet, snaplen, if_tsresol = 9 (nanoseconds), end of options.
        file += block(1, le16(1) + le16(0) + le32(262_144) + le16(9) + le16(1) + [9, 0, 0, 0] + le16(0) + le16(0))
        for (index, frame) in frames.enumerated() {
            let stamp = UInt64(1_700_000_000) * 1_000_000_000 + UInt64(index) * 1_000_000
            file += block(6, le32(0) + le32(UInt32(stamp >> 32)) + le32(UInt32(stamp & 0xffff_ffff)) + le32(UInt32(frame.count)) + le32(UInt32(frame.count)) + frame)
            if index == 0 { file += block(4, [1, 2, 3, 4]) }
        }
        return file
    }
}
