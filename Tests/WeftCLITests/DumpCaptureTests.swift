import Foundation
import Testing
import WeftCrypto
import WeftModel
import WeftStore

/// Why captures cannot be made here (nil when they can): tcpdump needs root and the binary.
let captureUnavailable: String? = {
    if getuid() != 0 { return "weft dump's capture tests skipped: tcpdump needs root" }
    if !FileManager.default.isExecutableFile(atPath: "/usr/bin/tcpdump") {
        return "weft dump's capture tests skipped: /usr/bin/tcpdump is missing (Tools/install-test-deps installs it)"
    }
    return nil
}()

/// tcpdump capturing loopback traffic on some ports into a pcap file, stopped by `stop()`.
/// In immediate mode: otherwise packets wait in the kernel's ring for up to a second, and
/// those still there when tcpdump is stopped never reach the file.
final class LoopbackCapture {
    let file: String
    private let process: ChildProcess

    init(_ file: String, filter: String) async throws {
        self.file = file
        process = try ChildProcess(["-i", "lo", "--immediate-mode", "-U", "-w", file, filter], executable: URL(fileURLWithPath: "/usr/bin/tcpdump"))
        try await process.waitFor("listening on", inStderr: true)
    }

    /// SIGTERM, without waiting (nothing once it has ended).
    func terminate() { process.terminate() }

    /// SIGTERM; tcpdump writes what it has and exits.
    func stop() async throws {
        process.terminate()
        _ = try await process.wait()
    }
}

/// `weft dump ARGUMENTS --json`, which must exit 0; its records.
func dumpJSON(_ arguments: String...) async throws -> [[String: Any]] {
    let child = try ChildProcess(["dump"] + arguments + ["--json"])
    let result = (status: try await child.wait(), stdout: child.stdout, stderr: child.stderr)
    #expect(result.status == 0, "weft dump \(arguments): \(result.stderr)")
    return dumpRecords(result.stdout)
}

/// The JSON records `weft dump --json` printed.
func dumpRecords(_ output: String) -> [[String: Any]] {
    lines(output).compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
}

@Suite(
    "weft dump on a real capture of two nodes", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: captureUnavailable == nil, "\(captureUnavailable ?? "")"))
struct DumpCaptureTests {
    /// What a captured session left: the capture, the key log, the nodes (stopped) and their
    /// conversation and two messages.
    struct Session {
        let dir: TemporaryDirectory
        let capture: String
        let keyLog: String
        let port: String
        let alice: RunningNode, bob: RunningNode
        let conversation: String, first: String, second: String
        /// With `viaProxy`: what `weft dump --proxy … --json` printed.
        let proxyOutput: String?
    }

    /// Two nodes, alice with WEFT_KEYLOG, captured by tcpdump on bob's port while they make a
    /// conversation, two messages (one with a rich-content part bob downloads) and receipts.
    /// With `viaProxy`, alice dials bob through `weft dump --proxy`, given the key log.
    static func capturedSession(viaProxy: Bool = false) async throws -> Session {
        let dir = try TemporaryDirectory()
        let keyLog = dir.path("keys.log")
        let bob = try await RunningNode(dir, "bob")
        let alice = try await RunningNode(dir, "alice", meshKeyFrom: bob)
        try await bob.start()
        defer { bob.process?.terminate() }
        let port = String(try #require(bob.address.split(separator: ":").last))
        let capture = try await LoopbackCapture(dir.path("weft.pcap"), filter: "tcp port \(port)")
        defer { capture.terminate() }  // also when the session fails early
        var proxy: ChildProcess?
        var dialed = bob.address
        if viaProxy {
            let child = try ChildProcess(["dump", "--proxy", "127.0.0.1:0", "--to", bob.address, "--keylog", keyLog, "--json"])
            proxy = child
            let said = try await child.waitFor("proxying ", inStderr: true)
            let words = try #require(lines(said).first { $0.contains("proxying ") }).split(separator: " ")
            dialed = String(try #require(words.firstIndex(of: "proxying").map { words[$0 + 1] }))
        }
        defer { proxy?.terminate() }
        try await alice.start(["--peer", dialed], environment: ["WEFT_KEYLOG": keyLog])
        defer { alice.process?.terminate() }
        try await eventually("alice meets bob") { try await alice.ok("peers").hasPrefix("bob  ") }

        let conversation = try await alice.ok("conv new", arguments: ["bob"])
        let first = try await alice.ok("send", arguments: [conversation, "--text", "hello bob"])
        let file = dir.path("notes.txt")
        try Data((0..<4_000).map { "note \($0): bring the maps\n" }.joined().utf8).write(to: URL(fileURLWithPath: file))
        let second = try await alice.ok("send", arguments: [conversation, "--text", "notes attached", "--file", "\(file):text/plain"])
        _ = try await bob.ok("wait", arguments: [second])
        _ = try await bob.ok("download", arguments: [second, "--out", dir.path("received.txt")])
        _ = try await bob.ok("read", arguments: [first])
        // Bob's read receipt reaches alice: every operation has crossed.
        try await eventually("alice sees bob's read receipt") {
            let messages = try await alice.json("msgs", arguments: [conversation]) as? [[String: Any]] ?? []
            return messages.contains { message in
                message["id"] as? String == first
                    && (message["recipients"] as? [[String: Any]] ?? []).contains { $0["status"] as? String == "read" }
            }
        }
        #expect(try await alice.stop() == 0)
        #expect(try await bob.stop() == 0)
        try await capture.stop()
        var proxyOutput: String?
        if let proxy {
            // The connection's end has passed: its last records are out once the output stops growing.
            try await eventually("the proxy shows the connection's CLOSE") { proxy.stdout.contains("\"CLOSE\"") }
            proxy.terminate()
            _ = try await proxy.wait()
            proxyOutput = proxy.stdout
        }
        return Session(
            dir: dir, capture: capture.file, keyLog: keyLog, port: port, alice: alice, bob: bob, conversation: conversation, first: first,
            second: second, proxyOutput: proxyOutput)
    }

    @Test("two nodes, one with WEFT_KEYLOG, captured by tcpdump while they make a conversation, messages, receipts and a rich-content part: weft dump decodes exactly the operations the nodes hold, with valid signatures, and the chunks with their hash check")
    func captureOfTwoNodes() async throws {
        let session = try await Self.capturedSession()
        let result = try await weft("dump", session.capture, "--keylog", session.keyLog, "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let records = dumpRecords(result.stdout)
        #expect(!records.contains { $0["kind"] as? String == "problem" }, "\(records.filter { $0["kind"] as? String == "problem" })")
        let handshakes = records.filter { $0["kind"] as? String == "handshake" }
        #expect(Set(handshakes.compactMap { $0["displayName"] as? String }) == ["alice", "bob"])

        try await Self.expectOperations(records, of: session)
    }

    @Test("weft dump --proxy between two nodes forwards their traffic untouched (they replicate as ever) and decodes it as it passes: the same operations the nodes hold")
    func proxy() async throws {
        let session = try await Self.capturedSession(viaProxy: true)
        let records = dumpRecords(try #require(session.proxyOutput))
        #expect(!records.contains { $0["kind"] as? String == "problem" }, "\(records.filter { $0["kind"] as? String == "problem" })")
        #expect(Set(records.filter { $0["kind"] as? String == "handshake" }.compactMap { $0["displayName"] as? String }) == ["alice", "bob"])
        try await Self.expectOperations(records, of: session)
    }

    @Test("damaged input: a capture cut in the middle of a frame, a flipped byte in a record, a key log of another session; each reported with its offset, decoding going on where it can, and weft dump exits 0")
    func damagedCaptures() async throws {
        let session = try await Self.capturedSession()
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: session.capture)))
        let packets = PcapRecords(bytes)
        let clean = dumpRecords(try await weft("dump", session.capture, "--keylog", session.keyLog, "--json").stdout)
        let frames = clean.filter { $0["kind"] as? String == "frame" }

        // Cut inside the last packet that carries a frame: every frame before it decodes, and
        // the file's problem names the offset of the cut record.
        let cutAt = try #require(packets.records.last { $0.count > 100 })
        let cut = session.dir.path("cut.pcap")
        try Data(bytes[..<(cutAt.lowerBound + 40)]).write(to: URL(fileURLWithPath: cut))
        let cutRecords = try await dumpJSON(cut, "--keylog", session.keyLog)
        let fileProblem = try #require(cutRecords.first { $0["kind"] as? String == "problem" && $0["connection"] as? Int == 0 })
        #expect(fileProblem["offset"] as? Int == cutAt.lowerBound, "\(fileProblem)")
        #expect(cutRecords.filter { $0["kind"] as? String == "frame" }.count >= frames.count - 2)

        // A flipped byte in the middle of the first DATA frame alice sent: her direction stops
        // there with a problem at that record's offset; bob's direction decodes whole.
        let target = try #require(frames.first { $0["from"] as? String == "initiator" && $0["type"] as? String == "DATA" })
        let targetTime = try #require(target["time"] as? Int)
        let packet = try #require(packets.records.first { packets.time(of: $0) == targetTime && $0.count > 100 })
        var flipped = bytes
        flipped[packet.upperBound - 10] ^= 0x01
        let flippedPath = session.dir.path("flipped.pcap")
        try Data(flipped).write(to: URL(fileURLWithPath: flippedPath))
        let damaged = try await dumpJSON(flippedPath, "--keylog", session.keyLog)
        let problems = damaged.filter { $0["kind"] as? String == "problem" }
        #expect(problems.count == 1 && problems.first?["from"] as? String == "initiator" && problems.first?["offset"] as? Int == target["offset"] as? Int, "\(problems)")
        #expect(damaged.filter { $0["kind"] as? String == "frame" && $0["from"] as? String == "responder" }.count
            == frames.filter { $0["from"] as? String == "responder" }.count)

        // A key log that does not name this connection: structure and lengths, and why.
        let other = session.dir.path("other.keys")
        let otherLines = try String(contentsOfFile: session.keyLog, encoding: .utf8).split(separator: "\n").map { line in
            var words = line.split(separator: " ").map(String.init)
            words[1] = String(repeating: "ab", count: 32)  // another connection's name
            return words.joined(separator: " ")
        }
        try (otherLines.joined(separator: "\n") + "\n").write(toFile: other, atomically: true, encoding: .utf8)
        let wrong = try await dumpJSON(session.capture, "--keylog", other)
        #expect(wrong.filter { $0["kind"] as? String == "handshake" }.count == 3)
        #expect(!wrong.contains { $0["kind"] as? String == "frame" })
        let notes = wrong.compactMap { $0["note"] as? String }
        #expect(notes.count == 2 && notes.allSatisfy { $0.contains("no entry for this connection") }, "\(notes)")
    }

    @Test("a capture that starts in the middle of a connection: with --port, weft dump says it cannot decode that connection and why; without, it does not take it for Weft's")
    func midConnection() async throws {
        let session = try await Self.capturedSession()
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: session.capture)))
        let packets = PcapRecords(bytes)
        // Everything from the tenth packet on: the handshake is gone.
        try #require(packets.records.count > 10, "\(packets.records.count) packets in \(bytes.count) bytes")
        let late = session.dir.path("late.pcap")
        try Data(bytes[..<24] + bytes[packets.records[10].lowerBound...]).write(to: URL(fileURLWithPath: late))
        let withPort = dumpRecords(try await weft("dump", late, "--keylog", session.keyLog, "--port", session.port, "--json").stdout)
        let note = try #require(withPort.first { $0["kind"] as? String == "note" })
        #expect((note["reason"] as? String)?.contains("starts in the middle of this connection") == true)
        #expect(!withPort.contains { ["frame", "record", "problem"].contains($0["kind"] as? String ?? "") })
        let without = try await weft("dump", late, "--keylog", session.keyLog, "--json")
        #expect(without.status == 0 && without.stdout.isEmpty, "\(without.stdout)")
    }

    /// The operations `records` decode are exactly those both nodes hold in the conversation,
    /// each signature valid; chunks all check.
    static func expectOperations(_ records: [[String: Any]], of session: Session) async throws {
        var decoded: [String: [String: Any]] = [:]
        for record in records where record["message"] as? String == "OPERATIONS" {
            for operation in record["operations"] as? [[String: Any]] ?? [] {
                #expect(operation["signatureValid"] as? Bool == true)
                if let id = operation["id"] as? String { decoded[id] = operation }
            }
        }
        let chunks = records.filter { $0["message"] as? String == "CHUNK" }
        #expect(!chunks.isEmpty && chunks.allSatisfy { $0["hashCheck"] as? String == "ok" }, "\(chunks)")
        let conversationID = try #require(ConversationID(bytes: hexBytes(session.conversation)))
        for node in [session.alice, session.bob] {
            let store = try Store(directory: URL(fileURLWithPath: node.home), localUser: try await userIdentity(node))
            let held = Set(try store.operations(in: conversationID).map(\.id.hex))
            #expect(held == Set(decoded.keys), "\(node.name) holds \(held.count) operations; the dump decoded \(decoded.count)")
        }
        #expect(decoded[session.first]?["kind"] as? String == "postMessage")
        #expect(decoded[session.second]?["kind"] as? String == "postMessageWithContent")
    }

    @Test("Protocol/weft.lua in tshark shows the same capture's preambles, handshake messages 1 to 3 and each transport record with the length weft dump gives it", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tshark"), "tshark is missing (Tools/install-test-deps installs it)"))
    func wiresharkDissector() async throws {
        let session = try await Self.capturedSession()
        let dump = dumpRecords(try await weft("dump", session.capture, "--keylog", session.keyLog, "--json").stdout)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/weft.lua").path
        let tshark = try ChildProcess(
            ["-X", "lua_script:\(script)", "-o", "weft.port:\(session.port)", "-r", session.capture, "-T", "fields",
             "-e", "tcp.srcport", "-e", "weft.version", "-e", "weft.handshake.message", "-e", "weft.record.length"],
            executable: URL(fileURLWithPath: "/usr/bin/tshark"))
        #expect(try await tshark.wait() == 0, "\(tshark.stderr)")
        var versions = 0, handshakes: [Int] = [], records: [String: [Int]] = [:]
        for line in lines(tshark.stdout) {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 4 else { continue }
            let from = fields[0] == session.port ? "responder" : "initiator"
            versions += fields[1].split(separator: ",").filter { $0 == "1" }.count
            handshakes += fields[2].split(separator: ",").compactMap { Int($0) }
            records[from, default: []] += fields[3].split(separator: ",").compactMap { Int($0) }
        }
        #expect(versions == 2, "both preambles, version 1")
        #expect(handshakes.sorted() == [1, 2, 3])
        for side in ["initiator", "responder"] {
            let dumped = dump.filter { $0["kind"] as? String == "frame" && $0["from"] as? String == side }.compactMap { ($0["length"] as? Int).map { $0 - 4 } }
            #expect(!dumped.isEmpty && records[side] == dumped, "\(side): tshark \(records[side] ?? []) against weft dump \(dumped)")
        }
    }
}

/// Bytes from hex digits.
func hexBytes(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8)
    return stride(from: 0, to: digits.count - 1, by: 2).compactMap { UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16) }
}

/// A node's user identity, as `weft id` prints it.
func userIdentity(_ node: RunningNode) async throws -> PublicIdentity {
    try UserIdentifier.decode(try await node.userID())
}

/// The records of a classic pcap file (little-endian, microseconds, as tcpdump -w writes
/// here): each record's byte range in the file, header included.
struct PcapRecords {
    let bytes: [UInt8]
    let records: [Range<Int>]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        var records: [Range<Int>] = []
        var offset = 24
        while offset + 16 <= bytes.count {
            let length = Int(bytes[offset + 8]) | Int(bytes[offset + 9]) << 8 | Int(bytes[offset + 10]) << 16 | Int(bytes[offset + 11]) << 24
            guard offset + 16 + length <= bytes.count else { break }
            records.append(offset..<(offset + 16 + length))
            offset += 16 + length
        }
        self.records = records
    }

    /// A record's timestamp in nanoseconds, as weft dump gives it.
    func time(of record: Range<Int>) -> Int {
        func u32(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24 }
        return u32(record.lowerBound) * 1_000_000_000 + u32(record.lowerBound + 4) * 1000
    }
}

@Suite("weft dump on raw byte streams")
struct DumpStreamTests {
    /// `Protocol/vectors/NAME`.
    static func vector(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Protocol/vectors/\(name)").path
    }

    @Test("the handshake vector's two streams as raw files, with its key log: exactly the golden output; either stream alone: that direction's lines")
    func rawStreams() async throws {
        let dir = try TemporaryDirectory()
        let vector = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.vector("handshake.json")))) as? [String: Any])
        var streams = ["initiator": [UInt8](), "responder": [UInt8]()]
        for step in vector["steps"] as? [[String: Any]] ?? [] {
            streams[step["side"] as? String ?? "", default: []] += hexBytes(step["writes"] as? String ?? "")
        }
        for (side, bytes) in streams { try Data(bytes).write(to: URL(fileURLWithPath: dir.path("\(side).bin"))) }
        let golden = try String(contentsOfFile: Self.vector("dump-handshake.txt"), encoding: .utf8)
        let both = try await weft(
            "dump", "--initiator-stream", dir.path("initiator.bin"), "--responder-stream", dir.path("responder.bin"), "--keylog",
            Self.vector("handshake.keylog"))
        #expect(both.status == 0 && both.stdout == golden, "\(both.stderr)")
        let one = try await weft("dump", "--responder-stream", dir.path("responder.bin"), "--keylog", Self.vector("handshake.keylog"))
        #expect(one.status == 0)
        #expect(lines(one.stdout).allSatisfy { $0.contains(" ← ") } && lines(one.stdout).first?.contains("preamble") == true, "\(one.stdout)")
        let refused = try await weft("dump", "--responder-stream", dir.path("responder.bin"), dir.path("x.pcap"))
        #expect(refused.status != 0 && lines(refused.stderr).count == 1, "\(refused.stderr)")
    }
}

@Suite(
    "weft dump on a capture of a LAN: mDNS announcements and the connection they led to", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: NamespaceLAN.unavailable == nil && captureUnavailable == nil, "\(NamespaceLAN.unavailable ?? captureUnavailable ?? "")"))
struct DumpLANCaptureTests {
    @Test("tcpdump inside alice's namespace while alice and bob find each other by mDNS and talk: weft dump shows both nodes' announcements read as the Weft service (user and mesh tag) and decodes the connection they led to")
    func discoveryCapture() async throws {
        let lan = try NamespaceLAN(nodes: 2)
        defer { lan.remove() }
        let dir = try TemporaryDirectory()
        let keyLog = dir.path("keys.log")
        let capture = dir.path("lan.pcap")
        let tcpdump = try ChildProcess(
            ["-i", "eth0", "--immediate-mode", "-U", "-w", capture, "udp port 5353 or tcp"], namespace: lan.namespace(1),
            executable: URL(fileURLWithPath: "/usr/bin/tcpdump"))
        defer { tcpdump.terminate() }  // also when the test fails early
        try await tcpdump.waitFor("listening on", inStderr: true)
        let alice = try await RunningNode(dir, "alice")
        let bob = try await RunningNode(dir, "bob", meshKeyFrom: alice)
        try await alice.start(listen: "0.0.0.0:0", namespace: lan.namespace(1), discovery: true, environment: ["WEFT_KEYLOG": keyLog])
        defer { alice.process?.terminate() }
        try await bob.start(listen: "0.0.0.0:0", namespace: lan.namespace(2), discovery: true)
        defer { bob.process?.terminate() }
        try await eventually("alice and bob connected", seconds: 30) { try await alice.ok("peers").hasPrefix("bob  ") }
        let conversation = try await alice.ok("conv new", arguments: ["bob"])
        let message = try await alice.ok("send", arguments: [conversation, "--text", "found you"])
        _ = try await bob.ok("wait", arguments: [message])
        #expect(try await alice.stop() == 0)
        #expect(try await bob.stop() == 0)
        tcpdump.terminate()
        _ = try await tcpdump.wait()

        let records = try await dumpJSON(capture, "--keylog", keyLog)
        let announced = Set(records.filter { $0["kind"] as? String == "mdns" }.flatMap { record in
            (record["records"] as? [[String: Any]] ?? []).compactMap { $0["weftUser"] as? String }
        })
        #expect(announced.isSuperset(of: [try await alice.userID(), try await bob.userID()]), "\(announced)")
        let meshTags = Set(records.filter { $0["kind"] as? String == "mdns" }.flatMap { record in
            (record["records"] as? [[String: Any]] ?? []).compactMap { $0["meshTag"] as? String }
        })
        #expect(meshTags.count == 1, "one mesh: \(meshTags)")
        let operations = records.filter { $0["message"] as? String == "OPERATIONS" }.flatMap { $0["operations"] as? [[String: Any]] ?? [] }
        #expect(operations.contains { $0["id"] as? String == message && $0["signatureValid"] as? Bool == true })
        #expect(!records.contains { $0["kind"] as? String == "problem" })
    }
}
