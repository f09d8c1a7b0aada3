/// A value in a dump record: what JSON can say.
public enum DumpValue: Sendable, Hashable {
    case string(String)
    case integer(Int64)
    case unsigned(UInt64)
    case bool(Bool)
    case list([DumpValue])
    case object([DumpField])

    /// The value as JSON text.
    public var json: String {
        switch self {
        case .string(let text): DumpRecord.quoted(text)
        case .integer(let value): String(value)
        case .unsigned(let value): String(value)
        case .bool(let value): value ? "true" : "false"
        case .list(let values): "[" + values.map(\.json).joined(separator: ",") + "]"
        case .object(let fields): "{" + fields.map { DumpRecord.quoted($0.name) + ":" + $0.value.json }.joined(separator: ",") + "}"
        }
    }

    /// The value as a dump line shows it.
    var text: String {
        switch self {
        case .string(let text): text.contains(" ") || text.isEmpty ? DumpRecord.quoted(text) : text
        case .integer(let value): String(value)
        case .unsigned(let value): String(value)
        case .bool(let value): value ? "yes" : "no"
        case .list(let values): "[" + values.map(\.text).joined(separator: ", ") + "]"
        case .object(let fields): "{" + fields.map { "\($0.name)=\($0.value.text)" }.joined(separator: " ") + "}"
        }
    }
}

/// A named value, in the order a record lists them.
public struct DumpField: Sendable, Hashable {
    public var name: String
    public var value: DumpValue

    public init(_ name: String, _ value: DumpValue) {
        self.name = name
        self.value = value
    }
}

/// One thing `weft dump` shows: a preamble, a handshake message, a transport record or frame,
/// a sync message, a DNS message, or a problem with the input. Its JSON form is one object
/// whose field names are stable (Protocol/DUMP.md documents them).
public struct DumpRecord: Sendable, Hashable {
    /// Nanoseconds since the Unix epoch, of the packet that completed it (0 for raw input).
    public var time: Int64
    /// The connection's number in the capture (from 1), 0 for what belongs to none.
    public var connection: Int
    /// "initiator" or "responder": the side that sent it; empty for what belongs to none.
    public var from: String
    /// Where it starts in its direction's byte stream, and its size in bytes.
    public var offset: UInt64
    public var length: Int
    /// "preamble", "handshake", "record", "frame", "note", "problem", "mdns".
    public var kind: String
    public var fields: [DumpField]

    public init(time: Int64, connection: Int, from: String, offset: UInt64, length: Int, kind: String, fields: [DumpField]) {
        self.time = time
        self.connection = connection
        self.from = from
        self.offset = offset
        self.length = length
        self.kind = kind
        self.fields = fields
    }

    /// The value of field `name`, if the record has it.
    public subscript(name: String) -> DumpValue? { fields.first { $0.name == name }?.value }

    /// One line of JSON.
    public var json: String {
        DumpValue.object(
            [
                DumpField("time", .integer(time)), DumpField("connection", .integer(Int64(connection))), DumpField("from", .string(from)),
                DumpField("offset", .unsigned(offset)), DumpField("length", .integer(Int64(length))), DumpField("kind", .string(kind)),
            ] + fields
        ).json
    }

    /// One line of text: time, connection and direction, offset and size, kind and fields.
    public var text: String {
        let seconds = time / 1_000_000_000, micros = (time % 1_000_000_000) / 1000
        let fraction = String(micros)
        let stamp = "\(seconds).\(String(repeating: "0", count: 6 - fraction.count))\(fraction)"
        let arrow = from == "initiator" ? "→" : from == "responder" ? "←" : "·"
        let details = fields.map { "\($0.name)=\($0.value.text)" }.joined(separator: " ")
        return "\(stamp) #\(connection) \(arrow) @\(offset) \(length)B \(kind)" + (details.isEmpty ? "" : " " + details)
    }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

/// Lowercase hex of bytes.
func hex(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text: [UInt8] = []
    for byte in bytes {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 0x0f)])
    }
    return String(decoding: text, as: UTF8.self)
}
