import ArgumentParser
import Foundation
import WeftControl
import WeftModel
import WeftNode

struct SendCommand: AsyncCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a message (text parts first, then file parts) and print its identifier; it leaves when a peer is reachable."
    )

    @OptionGroup var options: NodeOptions
    @Argument(help: "The conversation.") var conversation: String

    @Option(help: "A text/plain part (repeatable); - reads it from standard input (one trailing newline dropped).")
    var text: [String] = []

    @Option(help: "A file part, PATH or PATH:MIME (repeatable); without a MIME type it is guessed from the extension; - (or --file=-:MIME) reads standard input.")
    var file: [String] = []

    func validate() throws {
        guard !text.isEmpty || !file.isEmpty else { throw ValidationError("Give at least one --text or --file.") }
        let fromInput = text.filter { $0 == "-" }.count + file.filter { $0 == "-" || $0.hasPrefix("-:") }.count
        guard fromInput <= 1 else { throw ValidationError("Only one part can be read from standard input (-).") }
    }

    func execute() async throws {
        let id = try parseConversation(conversation)
        var parts: [ControlRequest.FilePart] = []
        for argument in text {
            guard argument == "-" else {
                parts.append(ControlRequest.FilePart(mimeType: "text/plain", source: .data(Array(argument.utf8))))
                continue
            }
            var bytes = try Self.standardInput()
            if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            guard String(validating: bytes, as: UTF8.self) != nil else { throw CLIError("The text read from standard input is not UTF-8.") }
            parts.append(ControlRequest.FilePart(mimeType: "text/plain", source: .data(bytes)))
        }
        for argument in file { parts.append(try filePart(argument)) }
        // Files go by path: the node reads them itself, and a large one travels as rich
        // content (SPEC.md §17) instead of through the control socket.
        let total = parts.reduce(0) { total, part in if case .data(let data) = part.source { total + data.count } else { total } }
        guard total <= WeftModel.Operation.maxByteCount else {
            throw CLIError("The message's parts hold \(total) bytes; one message holds at most \(WeftModel.Operation.maxByteCount) bytes.")
        }
        let request: ControlRequest = parts.contains { if case .file = $0.source { true } else { false } }
            ? .sendFiles(parts, in: id)
            : .send(parts.map { part in
                guard case .data(let data) = part.source else { return ControlRequest.Part(mimeType: part.mimeType, data: []) }
                return ControlRequest.Part(mimeType: part.mimeType, data: data)
            }, in: id)
        let message = try await options.withNode { node in
            guard case .sent(let message) = try await node.request(request) else {
                throw ControlClientError.unexpectedResponse("SEND")
            }
            return message
        }
        if options.json { try printJSON(["message": message.hex]) } else { say(message.hex) }
    }

    /// `PATH` or `PATH:MIME` (the MIME type after the last colon, when it holds a slash); a
    /// path of `-` is standard input.
    private func filePart(_ argument: String) throws -> ControlRequest.FilePart {
        var path = argument
        var mimeType: String?
        let files = FileManager.default
        if let colon = argument.lastIndex(of: ":") {
            let (prefix, suffix) = (String(argument[..<colon]), String(argument[argument.index(after: colon)...]))
            if suffix.contains("/") {
                path = prefix
                mimeType = suffix
            } else if !files.fileExists(atPath: argument), prefix == "-" || files.fileExists(atPath: prefix) {
                // `note.txt:textplain`: a MIME type without its slash, not a file name.
                throw CLIError("The MIME type \"\(suffix)\" after \(prefix) has no slash: write it as type/subtype, for example text/plain.")
            }
        }
        let type = mimeType ?? (path == "-" ? "application/octet-stream" : Self.guessMIMEType(path))
        guard MessagePart.isValidMIMEType(type) else { throw CLIError("The MIME type \"\(type)\" is not of the form type/subtype.") }
        if path == "-" { return ControlRequest.FilePart(mimeType: type, source: .data(try Self.standardInput())) }
        var isDirectory: ObjCBool = false
        if files.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw CLIError("\(path) is a directory: --file takes a file.")
        }
        guard files.isReadableFile(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "it cannot be read" : "there is no such file"
            throw CLIError("Cannot read \(path): \(reason).")
        }
        let absolute = URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: files.currentDirectoryPath)).standardizedFileURL.path
        return ControlRequest.FilePart(mimeType: type, source: .file(absolute))
    }

    /// Everything on standard input, up to the size one message holds (and one byte more, to
    /// notice a larger input).
    private static func standardInput() throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while bytes.count <= WeftModel.Operation.maxByteCount {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw CLIError("Cannot read standard input: \(String(cString: strerror(errno))).") }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return bytes
    }

    private static func guessMIMEType(_ path: String) -> String {
        let types = [
            "txt": "text/plain", "md": "text/markdown", "html": "text/html", "json": "application/json",
            "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "pdf": "application/pdf",
        ]
        return types[URL(fileURLWithPath: path).pathExtension.lowercased()] ?? "application/octet-stream"
    }
}
