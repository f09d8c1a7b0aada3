import Testing
@testable import WeftCapture

/// Every packet a decoder gives for `bytes` fed in pieces of `piece` bytes, and the errors.
func readAll(_ bytes: [UInt8], piece: Int = .max) -> (packets: [CapturedPacket], errors: [CaptureError]) {
    var decoder = CaptureFileDecoder()
    var packets: [CapturedPacket] = [], errors: [CaptureError] = []
    var index = 0
    repeat {
        let end = min(bytes.count, index + max(1, min(piece, bytes.count)))
        decoder.feed(bytes[index..<end])
        index = end
        while !decoder.isEnded {
            do {
                guard let packet = try decoder.next() else { break }
                packets.append(packet)
            } catch { errors.append(error) }
        }
    } while index < bytes.count && !decoder.isEnded
    do { try decoder.finish() } catch { errors.append(error) }
    return (packets, errors)
}

@Suite("Capture files: pcap and pcapng, fed in any pieces")
struct CaptureFileTests {
    static let frames = (0..<5).map { index in
        CaptureBuilder.tcp(from: CaptureBuilder.alice, to: CaptureBuilder.bob, sequence: UInt32(index * 10), payload: Array(repeating: UInt8(index), count: index * 10))
    }

    @Test("pcap in either byte order and pcapng give the same packets, timestamps and link type, whatever pieces the bytes come in", arguments: [1, 7, 100, Int.max])
    func formats(piece: Int) throws {
        for file in [CaptureBuilder.pcap(Self.frames), CaptureBuilder.pcap(Self.frames, bigEndian: true), CaptureBuilder.pcapng(Self.frames)] {
            let (packets, errors) = readAll(file, piece: piece)
            #expect(errors.isEmpty, "\(errors)")
            #expect(packets.map { Array($0.data) } == Self.frames)
            #expect(packets.allSatisfy { $0.linkType == 1 })
            #expect(packets.map(\.timestamp) == (0..<5).map { 1_700_000_000_000_000_000 + Int64($0) * 1_000_000 })
        }
    }

    @Test("a capture cut in the middle of a record gives every whole packet and says where the cut record starts")
    func cutShort() throws {
        let whole = CaptureBuilder.pcap(Self.frames)
        let lastRecord = whole.count - (16 + Self.frames[4].count)
        let (packets, errors) = readAll(Array(whole.prefix(whole.count - 3)))
        #expect(packets.count == 4)
        #expect(errors == [CaptureError(offset: lastRecord, "the capture ends inside a record (\(16 + Self.frames[4].count - 3) bytes left over): it was cut short")])
    }

    @Test("a pcapng block whose trailing length is damaged is skipped with its offset, and the packets after it are read")
    func damagedBlock() throws {
        var file = CaptureBuilder.pcapng(Self.frames)
        let (packets, _) = readAll(file)
        let second = packets[1].fileOffset
        // The second packet block's trailing length is the last 4 bytes before the third block.
        file[packets[2].fileOffset - 1] ^= 0x40
        let (read, errors) = readAll(file)
        #expect(read.map { Array($0.data) } == [Self.frames[0]] + Self.frames[2...])
        #expect(errors.map(\.offset) == [second], "\(errors)")
    }

    @Test("bytes that are no capture are refused in one sentence at offset 0; a pcap record claiming an impossible length ends the reading there")
    func notACapture() throws {
        let (packets, errors) = readAll(Array("GET / HTTP/1.1\r\n".utf8))
        #expect(packets.isEmpty && errors == [CaptureError(offset: 0, "not a pcap or pcapng capture: it starts with 47455420")])
        var file = CaptureBuilder.pcap(Self.frames)
        let third = 24 + (0..<2).map { 16 + Self.frames[$0].count }.reduce(0, +)
        file[third + 8 + 3] = 0x7f  // captured length (little-endian): its top byte
        let (some, damage) = readAll(file)
        #expect(some.count == 2)
        #expect(damage.map(\.offset) == [third])
    }
}
