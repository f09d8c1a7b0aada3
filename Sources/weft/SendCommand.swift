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

    @Option(help: "A text/plain part (repeatable).")
    var text: [String] = []

    @Option(help: "A file part, PATH or PATH:MIME (repeatable); without a MIME type it is guessed from the extension.")
    var file: [String] = []

    func validate() throws {
        guard !text.isEmpty || !file.isEmpty else { throw ValidationError("Give at least one --text or --file.") }
    }

    func execute() async throws {
        let id = try parseConversation(conversation)
        var parts = text.map { ControlRequest.Part(mimeType: "text/plain", data: Array($0.utf8)) }
        for argument in file { parts.append(try filePart(argument)) }
        let total = parts.reduce(0) { $0 + $1.data.count }
        guard total <= WeftModel.Operation.maxByteCount else {
            throw CLIError("The message's parts hold \(total) bytes; one message holds at most \(WeftModel.Operation.maxByteCount) bytes.")
        }
        let message = try await options.withNode { node in
            guard case .sent(let message) = try await node.request(.send(parts, in: id)) else {
                throw ControlClientError.unexpectedResponse("SEND")
            }
            return message
        }
        if options.json { try printJSON(["message": message.hex]) } else { say(message.hex) }
    }

    /// `PATH` or `PATH:MIME` (the MIME type after the last colon, when it holds a slash).
    private func filePart(_ argument: String) throws -> ControlRequest.Part {
        var path = argument
        var mimeType: String?
        if let colon = argument.lastIndex(of: ":"), argument[argument.index(after: colon)...].contains("/") {
            path = String(argument[..<colon])
            mimeType = String(argument[argument.index(after: colon)...])
        }
        let type = mimeType ?? Self.guessMIMEType(path)
        guard MessagePart.isValidMIMEType(type) else { throw CLIError("The MIME type \"\(type)\" is not of the form type/subtype.") }
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "it cannot be read" : "there is no such file"
            throw CLIError("Cannot read \(path): \(reason).")
        }
        return ControlRequest.Part(mimeType: type, data: [UInt8](data))
    }

    private static func guessMIMEType(_ path: String) -> String {
        let types = [
            "txt": "text/plain", "md": "text/markdown", "html": "text/html", "json": "application/json",
            "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "pdf": "application/pdf",
        ]
        return types[URL(fileURLWithPath: path).pathExtension.lowercased()] ?? "application/octet-stream"
    }
}
