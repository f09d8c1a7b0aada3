import Testing
import WeftCrypto
@testable import WeftCapture

/// The segment of a frame built by `CaptureBuilder.tcp`.
private func segment(_ frame: [UInt8]) throws -> TCPSegment {
    let packet = CapturedPacket(timestamp: 0, linkType: 1, data: frame[...], originalLength: frame.count, fileOffset: 0)
    guard case .tcp(let segment) = try PacketDecoder.decode(packet) else { throw CaptureError(offset: 0, "not TCP") }
    return segment
}

/// What the events say of each direction: its bytes (gaps as zeros are not made up: a gap is
/// recorded instead), whether it ended and how.
private struct Streams {
    var opened: [(TCPConnectionKey, Bool)] = []
    var bytes: [TCPDirection: [UInt8]] = [:]
    var gaps: [TCPDirection: [(offset: UInt64, count: UInt64)]] = [:]
    var ended: [TCPDirection: Bool] = [:]  // reset?

    mutating func take(_ events: [TCPStreamEvent]) {
        for event in events {
            switch event {
            case .opened(let key, let sawStart, _): opened.append((key, sawStart))
            case .data(_, let direction, let offset, let data, _):
                #expect(offset == UInt64(bytes[direction, default: []].count) + gaps[direction, default: []].reduce(0) { $0 + $1.count })
                bytes[direction, default: []] += data
            case .gap(_, let direction, let offset, let count): gaps[direction, default: []].append((offset, count))
            case .ended(_, let direction, let reset, _): ended[direction] = reset
            }
        }
    }
}

@Suite("TCP reassembly: segments back into each connection's two streams")
struct TCPReassemblerTests {
    static let alice = CaptureBuilder.alice, bob = CaptureBuilder.bob
    static let message = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }

    /// Alice's stream cut in pieces of 1 to 700 bytes, each as a segment from `isn`.
    static func pieces(isn: UInt32, of bytes: [UInt8]) -> [(offset: Int, bytes: [UInt8])] {
        var generator = SplitMix64(seed: 5)
        var result: [(Int, [UInt8])] = []
        var offset = 0
        while offset < bytes.count {
            let count = min(bytes.count - offset, 1 + Int(generator.next() % 700))
            result.append((offset, Array(bytes[offset..<(offset + count)])))
            offset += count
        }
        return result
    }

    static func frame(isn: UInt32, _ piece: (offset: Int, bytes: [UInt8]), flags: TCPSegment.Flags = .ack) -> [UInt8] {
        CaptureBuilder.tcp(from: alice, to: bob, sequence: isn &+ 1 &+ UInt32(piece.offset), flags: flags, payload: piece.bytes)
    }

    @Test("a whole connection: handshake, data both ways, FIN both ways; the initiator is who sent the SYN", arguments: [UInt32(1000), 0xffff_f000])
    func wholeConnection(isn: UInt32) throws {
        var reassembler = TCPReassembler()
        var streams = Streams()
        let reply = Array("pong".utf8)
        let frames = [
            CaptureBuilder.tcp(from: Self.alice, to: Self.bob, sequence: isn, flags: .syn),
            CaptureBuilder.tcp(from: Self.bob, to: Self.alice, sequence: 77, acknowledgement: isn &+ 1, flags: [.syn, .ack]),
        ] + Self.pieces(isn: isn, of: Self.message).map { Self.frame(isn: isn, $0) } + [
            CaptureBuilder.tcp(from: Self.bob, to: Self.alice, sequence: 78, flags: .ack, payload: reply),
            CaptureBuilder.tcp(from: Self.alice, to: Self.bob, sequence: isn &+ 1 &+ UInt32(Self.message.count), flags: [.fin, .ack]),
            CaptureBuilder.tcp(from: Self.bob, to: Self.alice, sequence: 78 + 4, flags: [.fin, .ack]),
        ]
        for frame in frames { streams.take(reassembler.add(try segment(frame), timestamp: 0)) }
        streams.take(reassembler.finish())
        #expect(streams.opened.count == 1)
        #expect(streams.opened.first?.0 == TCPConnectionKey(initiator: Self.alice, responder: Self.bob) && streams.opened.first?.1 == true)
        #expect(streams.bytes[.fromInitiator] == Self.message, "across the sequence numbers' wrap too")
        #expect(streams.bytes[.fromResponder] == reply)
        #expect(streams.ended == [.fromInitiator: false, .fromResponder: false])
    }

    @Test("segments out of order, duplicated and retransmitted overlapping others give the stream once, in order")
    func outOfOrderAndRetransmitted() throws {
        let isn: UInt32 = 0x7fff_fff0
        var pieces = Self.pieces(isn: isn, of: Self.message)
        // Retransmissions that overlap their neighbours: two pieces resent as one.
        for index in stride(from: 3, to: pieces.count - 1, by: 5) {
            pieces.append((pieces[index].offset, pieces[index].bytes + pieces[index + 1].bytes))
        }
        pieces += pieces.prefix(6)  // plain duplicates
        var generator = SplitMix64(seed: 9)
        pieces.shuffle(using: &generator)
        var reassembler = TCPReassembler()
        var streams = Streams()
        streams.take(reassembler.add(try segment(CaptureBuilder.tcp(from: Self.alice, to: Self.bob, sequence: isn, flags: .syn)), timestamp: 0))
        for piece in pieces { streams.take(reassembler.add(try segment(Self.frame(isn: isn, piece)), timestamp: 0)) }
        streams.take(reassembler.finish())
        #expect(streams.bytes[.fromInitiator] == Self.message)
        #expect(streams.gaps.isEmpty)
    }

    @Test("a capture that starts mid-connection reads the streams from the first byte it has, and says it lacks their start")
    func midConnection() throws {
        let isn: UInt32 = 5000
        let pieces = Self.pieces(isn: isn, of: Self.message)
        var reassembler = TCPReassembler()
        var streams = Streams()
        for piece in pieces.dropFirst(3) { streams.take(reassembler.add(try segment(Self.frame(isn: isn, piece)), timestamp: 0)) }
        #expect(streams.opened.count == 1 && streams.opened.first?.1 == false)
        #expect(streams.bytes[.fromInitiator] == Array(Self.message[pieces[3].offset...]))
    }

    @Test("a segment the capture lost is a gap: at the end of the capture, or once too much waits behind it; a reset ends the stream")
    func gapsAndReset() throws {
        let isn: UInt32 = 1
        let pieces = Self.pieces(isn: isn, of: Self.message)
        let lost = pieces[4]
        for limit in [16 << 20, 2_000] {
            var reassembler = TCPReassembler(maxPendingByteCount: limit)
            var streams = Streams()
            streams.take(reassembler.add(try segment(CaptureBuilder.tcp(from: Self.alice, to: Self.bob, sequence: isn, flags: .syn)), timestamp: 0))
            for (index, piece) in pieces.enumerated() where index != 4 {
                streams.take(reassembler.add(try segment(Self.frame(isn: isn, piece)), timestamp: 0))
            }
            if limit < Self.message.count {
                #expect(streams.gaps[.fromInitiator]?.count == 1, "declared before the end of the capture")
            }
            streams.take(reassembler.finish())
            let gaps = streams.gaps[.fromInitiator] ?? []
            #expect(gaps.count == 1 && gaps.first?.offset == UInt64(lost.offset) && gaps.first?.count == UInt64(lost.bytes.count))
            #expect(streams.bytes[.fromInitiator] == Array(Self.message[..<lost.offset] + Self.message[(lost.offset + lost.bytes.count)...]))
        }

        var reassembler = TCPReassembler()
        var streams = Streams()
        streams.take(reassembler.add(try segment(Self.frame(isn: isn, pieces[0])), timestamp: 0))
        streams.take(reassembler.add(try segment(CaptureBuilder.tcp(from: Self.bob, to: Self.alice, sequence: 9, flags: [.rst, .ack])), timestamp: 0))
        #expect(streams.ended == [.fromResponder: true])
    }
}
