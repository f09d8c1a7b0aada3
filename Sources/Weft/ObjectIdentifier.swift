import Foundation
import WeftModel

/// Object identifiers as URLs, like the SDK's `layer:///messages/...`:
/// `weft:///conversations/<32 hex digits>` and `weft:///messages/<64 hex digits>`.
public enum WeftIdentifier: Hashable, Sendable, CustomStringConvertible {
    case conversation(ConversationID)
    case message(OperationID)

    public var url: URL {
        switch self {
        case .conversation(let id): URL(string: "weft:///conversations/\(id.hex)")!
        case .message(let id): URL(string: "weft:///messages/\(id.hex)")!
        }
    }

    public var description: String { url.absoluteString }

    /// Parses a `weft:///` URL; anything else throws `invalidIdentifier`.
    public init(url: URL) throws(WeftError) {
        let parts = url.path.split(separator: "/")
        guard url.scheme == "weft", (url.host ?? "").isEmpty, parts.count == 2, let bytes = [UInt8](hexString: parts[1]) else {
            throw .invalidIdentifier(url.absoluteString)
        }
        switch parts[0] {
        case "conversations":
            guard let id = ConversationID(bytes: bytes) else { throw .invalidIdentifier(url.absoluteString) }
            self = .conversation(id)
        case "messages":
            guard let id = OperationID(bytes: bytes) else { throw .invalidIdentifier(url.absoluteString) }
            self = .message(id)
        default:
            throw .invalidIdentifier(url.absoluteString)
        }
    }
}

extension Array where Element == UInt8 {
    init?(hexString: Substring) {
        guard hexString.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = hexString.startIndex
        while index < hexString.endIndex {
            let next = hexString.index(index, offsetBy: 2)
            guard let byte = UInt8(hexString[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self = bytes
    }
}
