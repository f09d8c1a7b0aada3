import WeftCapture
import WeftDiscovery

/// An mDNS datagram (UDP 5353) in a dump, decoded by LAN discovery's own DNS codec (SPEC.md
/// §16): its questions, and the records it answers with, a Weft service's TXT record read as
/// the user and mesh tag it advertises.
enum MDNSDescription {
    static func record(_ datagram: UDPDatagram, time: Int64, fileOffset: Int) -> DumpRecord {
        var fields = [DumpField("source", .string("\(datagram.source)")), DumpField("destination", .string("\(datagram.destination)"))]
        do {
            let message = try DNSMessage(decoding: Array(datagram.payload))
            fields.append(DumpField("response", .bool(message.isResponse)))
            fields.append(DumpField("questions", .list(message.questions.map { .string("\($0.name) type \($0.type)") })))
            let records = message.answers + message.additionals
            fields.append(DumpField("records", .list(records.map { .object(Self.fields(of: $0)) })))
        } catch {
            fields.append(DumpField("problem", .string("not a DNS message: \(error)")))
        }
        return DumpRecord(time: time, connection: 0, from: "", offset: UInt64(fileOffset), length: datagram.payload.count, kind: "mdns", fields: fields)
    }

    private static func fields(of record: DNSResourceRecord) -> [DumpField] {
        var fields = [DumpField("name", .string("\(record.name)")), DumpField("ttl", .unsigned(UInt64(record.ttl)))]
        switch record.data {
        case .a(let address), .aaaa(let address):
            fields.append(DumpField("address", .string("\(IPAddress(address))")))
        case .ptr(let target):
            fields.append(DumpField("pointer", .string("\(target)")))
        case .srv(_, _, let port, let target):
            fields += [DumpField("target", .string("\(target)")), DumpField("port", .unsigned(UInt64(port)))]
        case .txt(let strings):
            if let service = WeftServiceRecord(txt: strings) {
                fields += [DumpField("weftUser", .string("\(service.user)")), DumpField("meshTag", .string(hex(service.meshTag)))]
            } else {
                fields.append(DumpField("text", .list(strings.map { .string(String(decoding: $0, as: UTF8.self)) })))
            }
        case .nsec, .other:
            fields.append(DumpField("type", .unsigned(UInt64(record.type))))
        }
        return fields
    }
}
