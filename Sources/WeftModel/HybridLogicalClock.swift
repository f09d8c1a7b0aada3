/// A hybrid logical clock timestamp (SPEC.md §12): milliseconds since the Unix epoch in the
/// high 48 bits, a counter in the low 16. Comparing the raw values orders events the way the
/// clock does.
public struct HLCTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public init(milliseconds: UInt64, counter: UInt16) {
        rawValue = (milliseconds << 16) | UInt64(counter)
    }

    public var milliseconds: UInt64 { rawValue >> 16 }
    public var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    public static func < (lhs: HLCTimestamp, rhs: HLCTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "\(milliseconds).\(counter)" }
}

/// The clock a replica stamps its operations with: never behind the wall clock, always ahead of
/// every timestamp it has seen, so an operation's timestamp is greater than its causes'.
/// Sans-I/O: the caller passes the wall clock reading.
public struct HybridLogicalClock: Sendable {
    public private(set) var last: HLCTimestamp

    public init(last: HLCTimestamp = HLCTimestamp(rawValue: 0)) { self.last = last }

    /// A new timestamp greater than every one seen so far and not behind `wallMilliseconds`.
    public mutating func tick(wallMilliseconds: UInt64) -> HLCTimestamp {
        let next: HLCTimestamp
        if wallMilliseconds > last.milliseconds {
            next = HLCTimestamp(milliseconds: wallMilliseconds, counter: 0)
        } else if last.counter < .max {
            next = HLCTimestamp(rawValue: last.rawValue + 1)
        } else {
            next = HLCTimestamp(milliseconds: last.milliseconds + 1, counter: 0)
        }
        last = next
        return next
    }

    /// Records a timestamp seen on another replica's operation.
    public mutating func observe(_ timestamp: HLCTimestamp) {
        if timestamp > last { last = timestamp }
    }
}
