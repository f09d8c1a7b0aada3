/// Why a recipient of the local user's message failed (SPEC.md §13.6), as the sender's node
/// words it for the sender's callback.
public enum DeliveryFailure: Sendable, Hashable, CustomStringConvertible {
    /// The recipient's node did not deliver within the message's time to live (milliseconds).
    case expired(timeToLive: UInt64)
    /// A node refused the message, for this reason.
    case rejected(String)

    /// "expired: not delivered within 12 h", "rejected: REASON".
    public var description: String {
        switch self {
        case .expired(let timeToLive): "expired: not delivered within \(Self.duration(timeToLive))"
        case .rejected(let reason): "rejected: \(reason)"
        }
    }

    /// A duration in milliseconds as people say it: its two largest units ("12 h",
    /// "1 h 30 min", "45 s", "250 ms").
    public static func duration(_ milliseconds: UInt64) -> String {
        let units: [(UInt64, String)] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1_000, "s"), (1, "ms")]
        var rest = milliseconds
        var parts: [String] = []
        for (size, name) in units where rest >= size && parts.count < 2 {
            parts.append("\(rest / size) \(name)")
            rest %= size
        }
        return parts.isEmpty ? "0 ms" : parts.joined(separator: " ")
    }
}
