/// Record types multicast DNS service discovery uses (RFC 1035, RFC 3596, RFC 2782, RFC 4034).
public enum DNSRecordType {
    public static let a: UInt16 = 1
    public static let ptr: UInt16 = 12
    public static let txt: UInt16 = 16
    public static let aaaa: UInt16 = 28
    public static let srv: UInt16 = 33
    public static let nsec: UInt16 = 47
    /// In questions only: every type.
    public static let any: UInt16 = 255
}

/// The Internet class; multicast DNS uses its top bit for other things (`DNSQuestion`,
/// `DNSResourceRecord`).
public let dnsClassInternet: UInt16 = 1

/// A question: "which records of this type does this name have".
public struct DNSQuestion: Hashable, Sendable {
    public var name: DNSName
    public var type: UInt16
    /// The class's top bit in multicast DNS: the asker would take a unicast answer (RFC 6762 §5.4).
    public var unicastResponse: Bool
    public var recordClass: UInt16

    public init(_ name: DNSName, type: UInt16, unicastResponse: Bool = false, recordClass: UInt16 = dnsClassInternet) {
        self.name = name
        self.type = type
        self.unicastResponse = unicastResponse
        self.recordClass = recordClass
    }
}

/// A record's data, by type. Types the decoder does not know keep their bytes.
public enum DNSRecordData: Hashable, Sendable {
    /// An IPv4 address (4 bytes).
    case a([UInt8])
    /// An IPv6 address (16 bytes).
    case aaaa([UInt8])
    case ptr(DNSName)
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName)
    /// Character strings of at most 255 bytes each (DNS-SD: `key=value`, RFC 6763 §6).
    case txt([[UInt8]])
    /// NSEC as multicast DNS uses it (RFC 6762 §6.1): the types this name has, none other.
    case nsec(next: DNSName, types: [UInt16])
    case other(type: UInt16, data: [UInt8])

    public var type: UInt16 {
        switch self {
        case .a: DNSRecordType.a
        case .aaaa: DNSRecordType.aaaa
        case .ptr: DNSRecordType.ptr
        case .srv: DNSRecordType.srv
        case .txt: DNSRecordType.txt
        case .nsec: DNSRecordType.nsec
        case .other(let type, _): type
        }
    }
}

/// A resource record.
public struct DNSResourceRecord: Hashable, Sendable {
    public var name: DNSName
    public var data: DNSRecordData
    /// The class's top bit in multicast DNS: this record replaces what a cache holds for the
    /// name and type (RFC 6762 §10.2). Set on unique records (SRV, TXT, addresses), not on
    /// shared ones (the service type's PTR).
    public var cacheFlush: Bool
    public var recordClass: UInt16
    /// Seconds; 0 says goodbye (RFC 6762 §10.1).
    public var ttl: UInt32

    public init(_ name: DNSName, _ data: DNSRecordData, ttl: UInt32, cacheFlush: Bool = false, recordClass: UInt16 = dnsClassInternet) {
        self.name = name
        self.data = data
        self.ttl = ttl
        self.cacheFlush = cacheFlush
        self.recordClass = recordClass
    }

    public var type: UInt16 { data.type }
}

/// A DNS message: the header's fields multicast DNS uses, and its four sections.
public struct DNSMessage: Hashable, Sendable {
    public var id: UInt16
    /// QR: a response (every multicast DNS answer), not a query.
    public var isResponse: Bool
    /// AA: multicast DNS responses set it (RFC 6762 §18.4).
    public var isAuthoritative: Bool
    /// TC: the querier's known answers continue in the next packet (RFC 6762 §7.2).
    public var isTruncated: Bool
    /// The header's other bits (opcode, RD, RA, Z, AD, CD, RCODE), kept as received.
    public var otherFlags: UInt16
    public var questions: [DNSQuestion]
    public var answers: [DNSResourceRecord]
    public var authorities: [DNSResourceRecord]
    public var additionals: [DNSResourceRecord]

    public init(
        id: UInt16 = 0, isResponse: Bool, isAuthoritative: Bool = false, isTruncated: Bool = false, otherFlags: UInt16 = 0,
        questions: [DNSQuestion] = [], answers: [DNSResourceRecord] = [], authorities: [DNSResourceRecord] = [],
        additionals: [DNSResourceRecord] = []
    ) {
        self.id = id
        self.isResponse = isResponse
        self.isAuthoritative = isAuthoritative
        self.isTruncated = isTruncated
        self.otherFlags = otherFlags & ~(Self.responseBit | Self.authoritativeBit | Self.truncatedBit)
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    static let responseBit: UInt16 = 0x8000
    static let authoritativeBit: UInt16 = 0x0400
    static let truncatedBit: UInt16 = 0x0200
    static let topClassBit: UInt16 = 0x8000

    var flags: UInt16 {
        otherFlags | (isResponse ? Self.responseBit : 0) | (isAuthoritative ? Self.authoritativeBit : 0) | (isTruncated ? Self.truncatedBit : 0)
    }
}
