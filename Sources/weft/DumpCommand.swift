import ArgumentParser
import Foundation
import Synchronization
import WeftDump
import WeftNode
import WeftWire

struct DumpCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Decode Weft traffic: a pcap or pcapng capture (tcpdump -i lo -w FILE port P), or raw byte streams, decrypted with a key log (WEFT_KEYLOG).",
        discussion: """
            Shows, per connection and direction, with timestamps, offsets and sizes: the preambles, \
            the handshake messages, every transport record and, with the key log, each frame, the \
            sync messages and the operations in them, and chunks with their hash check. mDNS \
            packets (UDP 5353) in a capture are decoded too. Damaged input is reported with its \
            byte offset and decoding goes on where it can. --json prints one object per record \
            (Protocol/DUMP.md lists the fields).
            """
    )

    @Argument(help: "A capture file (pcap or pcapng) to decode.")
    var capture: String?

    @Option(name: .customLong("keylog"), help: "The key log the nodes wrote (default: $WEFT_KEYLOG).")
    var keyLogPath: String?

    @Option(name: .customLong("initiator-stream"), help: "A raw byte stream the initiator sent (instead of a capture).")
    var initiatorStream: String?

    @Option(name: .customLong("responder-stream"), help: "A raw byte stream the responder sent (with or without --initiator-stream).")
    var responderStream: String?

    @Option(help: "Proxy: listen here (host:port), forward each connection to --to untouched, and decode what passes.", transform: parseAddress)
    var proxy: PeerAddress?

    @Option(name: .customLong("to"), help: "Proxy: the node to forward to (host:port).", transform: parseAddress)
    var target: PeerAddress?

    @Flag(help: "One JSON object per record.")
    var json = false

    @Option(name: .customLong("port"), help: "Decode the TCP connections on this port (repeatable); default: every connection that starts like Weft's.")
    var ports: [UInt16] = []

    @Option(name: .customLong("connection"), help: "Show only this connection (its number in the dump; repeatable).")
    var connections: [Int] = []

    @Option(name: .customLong("type"), help: "Show only frames of this type or sync message (PING, DATA, OPERATIONS, CHUNK, …; repeatable).")
    var types: [String] = []

    @Option(name: .customLong("conversation"), help: "Show only sync messages that name this conversation (hex; repeatable).")
    var conversations: [String] = []

    func validate() throws {
        let streams = initiatorStream != nil || responderStream != nil
        let sources = [capture != nil, streams, proxy != nil].filter { $0 }.count
        guard sources == 1 else {
            throw ValidationError("Give one input: a capture file, --initiator-stream and/or --responder-stream, or --proxy with --to.")
        }
        guard (proxy == nil) == (target == nil) else { throw ValidationError("--proxy and --to go together.") }
        for conversation in conversations where conversation.count != 32 || !conversation.allSatisfy(\.isHexDigit) {
            throw ValidationError("--conversation takes a conversation identifier: 32 hex digits, not \"\(conversation)\".")
        }
    }

    func execute() async throws {
        // Records and their buffers come and go by the megabyte: keep them for the next ones.
        HeapTrim.keepFreedBuffers()
        var filter = DumpFilter()
        filter.ports = Set(ports)
        filter.connections = Set(connections)
        filter.types = Set(types.map { $0.uppercased() })
        filter.conversations = Set(conversations.map { $0.lowercased() })
        if let proxy, let target {
            let keyLog = LiveKeyLog(path: keyLogFile)
            let json = json
            let output = Mutex(())
            try await DumpProxy(listen: proxy, target: target, keyLog: keyLog, filter: filter) { records in
                output.withLock { _ in for record in records { say(json ? record.json : record.text) } }
            }.run()
            return
        }
        let keys = try readKeyLog()
        if let capture {
            let dump = CaptureDump(keys: keys, filter: filter)
            try read(capture) { show(dump.feed($0)) }
            show(dump.finish())
        } else {
            let decoder = ConnectionDecoder(number: 1, keys: keys)
            for (path, fromInitiator) in [(initiatorStream, true), (responderStream, false)] {
                guard let path else { continue }
                var offset: UInt64 = 0
                try read(path) { bytes in
                    show(decoder.feed(fromInitiator: fromInitiator, offset: offset, bytes, time: 0).filter(filter.admits))
                    offset += UInt64(bytes.count)
                }
            }
        }
    }

    private func show(_ records: [DumpRecord]) {
        for record in records { say(json ? record.json : record.text) }
    }

    /// The key log's entries; its damaged lines are named on standard error.
    private var keyLogFile: String? {
        guard let path = keyLogPath ?? ProcessInfo.processInfo.environment[KeyLogFile.environmentVariable], !path.isEmpty else { return nil }
        return path
    }

    private func readKeyLog() throws -> [[UInt8]: KeyLogEntry] {
        guard let path = keyLogFile else { return [:] }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("Cannot read the key log \(path).")
        }
        let (entries, problems) = KeyLogEntry.parse(String(decoding: data, as: UTF8.self))
        for problem in problems { warn("the key log \(path), line \(problem.line): \(problem.reason); the line is skipped") }
        return entries
    }

    /// Reads `path` a megabyte at a time into one buffer, handed to `body` each time.
    private func read(_ path: String, _ body: (UnsafeRawBufferPointer) -> Void) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CLIError("Cannot read \(path): \(String(cString: strerror(errno))).") }
        defer { close(descriptor) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = Glibc.read(descriptor, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw CLIError("Cannot read \(path): \(String(cString: strerror(errno))).")
            }
            if count == 0 { return }
            body(UnsafeRawBufferPointer(rebasing: buffer.prefix(count)))
        }
    }
}
