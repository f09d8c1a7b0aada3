import Foundation
import Testing
import WeftDump
import WeftWire

/// `Protocol/vectors/NAME`.
func vectorFile(_ name: String) -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Protocol/vectors/\(name)")
}

/// Compares `text` with the golden file `name` (WEFT_WRITE_VECTORS=1 writes it instead).
func expectGolden(_ text: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let file = vectorFile(name)
    if ProcessInfo.processInfo.environment["WEFT_WRITE_VECTORS"] == "1" { try text.write(to: file, atomically: true, encoding: .utf8) }
    let golden = try String(contentsOf: file, encoding: .utf8)
    #expect(text == golden, "weft dump's output differs from \(name)", sourceLocation: sourceLocation)
}

@Suite("weft dump's golden outputs for the protocol vectors")
struct GoldenDumpTests {
    /// Each side's bytes in the handshake vector (handshake.json `steps[].writes`).
    static func handshakeStreams() throws -> (initiator: [UInt8], responder: [UInt8]) {
        let vector = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: vectorFile("handshake.json"))) as? [String: Any])
        var streams: (initiator: [UInt8], responder: [UInt8]) = ([], [])
        for step in vector["steps"] as? [[String: Any]] ?? [] {
            let digits = Array((step["writes"] as? String ?? "").utf8)
            let bytes = stride(from: 0, to: digits.count - 1, by: 2).compactMap { UInt8(String(decoding: digits[$0...($0 + 1)], as: UTF8.self), radix: 16) }
            if step["side"] as? String == "initiator" { streams.initiator += bytes } else { streams.responder += bytes }
        }
        return streams
    }

    static func dump(keys: [[UInt8]: KeyLogEntry]) throws -> [DumpRecord] {
        let streams = try handshakeStreams()
        let decoder = ConnectionDecoder(number: 1, keys: keys)
        return decoder.feed(fromInitiator: true, offset: 0, streams.initiator, time: 0)
            + decoder.feed(fromInitiator: false, offset: 0, streams.responder, time: 0)
    }

    @Test("the handshake vector's connection with its key log (handshake.keylog): dump-handshake.txt and dump-handshake.jsonl")
    func handshakeWithKeyLog() throws {
        let (keys, problems) = KeyLogEntry.parse(try String(contentsOf: vectorFile("handshake.keylog"), encoding: .utf8))
        #expect(problems.isEmpty && keys.count == 1)
        let records = try Self.dump(keys: keys)
        #expect(!records.contains { $0.kind == "problem" })
        try expectGolden(records.map(\.text).joined(separator: "\n") + "\n", "dump-handshake.txt")
        try expectGolden(records.map(\.json).joined(separator: "\n") + "\n", "dump-handshake.jsonl")
    }

    @Test("the handshake vector's connection without a key log: dump-handshake-nokeys.txt")
    func handshakeWithoutKeyLog() throws {
        try expectGolden(try Self.dump(keys: [:]).map(\.text).joined(separator: "\n") + "\n", "dump-handshake-nokeys.txt")
    }

    @Test("every sync message and content-transfer vector, valid and invalid, as weft dump shows it: dump-sync-messages.txt", arguments: ["sync-messages", "content-transfer"])
    func syncMessages(file: String) throws {
        let vector = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: vectorFile("\(file).json"))) as? [String: Any])
        var lines: [String] = []
        for group in ["messages", "invalid"] {
            for message in vector[group] as? [[String: Any]] ?? [] {
                let digits = Array((message["hex"] as? String ?? "").utf8)
                let bytes = stride(from: 0, to: digits.count - 1, by: 2).compactMap { UInt8(String(decoding: digits[$0...($0 + 1)], as: UTF8.self), radix: 16) }
                let fields = ConnectionDecoder.describe(syncPayload: bytes)
                lines.append("\(message["description"] as? String ?? "")\n  " + DumpValue.object(fields).json)
                if group == "messages" { #expect(!fields.contains { $0.name == "problem" }, "\(message["description"] ?? "")") }
                if group == "invalid" { #expect(fields.contains { $0.name == "problem" }, "\(message["description"] ?? "")") }
            }
        }
        try expectGolden(lines.joined(separator: "\n") + "\n", "dump-\(file).txt")
    }
}
