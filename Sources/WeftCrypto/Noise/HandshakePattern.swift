/// A Noise handshake pattern: pre-messages and message patterns of tokens (Noise §7).
///
/// Weft itself uses only XXpsk3; the other fundamental patterns are here so the implementation
/// is checked against every cacophony vector for our cipher suite, not just one.
public struct HandshakePattern: Sendable, Equatable {
    public enum Token: Sendable, Equatable {
        case e, s, ee, es, se, ss, psk
    }

    /// Public keys known before the handshake: the initiator's, then the responder's.
    public let initiatorPreMessage: [Token]
    public let responderPreMessage: [Token]
    /// Message patterns in order; even indices are sent by the initiator.
    public let messages: [[Token]]

    public var usesPreSharedKey: Bool { messages.contains { $0.contains(.psk) } }
    /// One-way patterns (N, K, X) send transport messages only from initiator to responder.
    public var isOneWay: Bool { messages.count == 1 }

    /// Parses a pattern name such as `XX`, `XXpsk3` or `NNpsk0+psk2`.
    public init?(name: String) {
        let parts = name.split(separator: "psk", maxSplits: 1, omittingEmptySubsequences: false)
        guard let base = Self.fundamental[String(parts[0])] else { return nil }
        var messages = base.messages
        if parts.count == 2 {
            for modifier in ("psk" + parts[1]).split(separator: "+") {
                guard modifier.hasPrefix("psk"), let n = Int(modifier.dropFirst(3)), n <= messages.count
                else { return nil }
                if n == 0 { messages[0].insert(.psk, at: 0) } else { messages[n - 1].append(.psk) }
            }
        }
        self.init(base.initiatorPreMessage, base.responderPreMessage, messages)
    }

    private init(_ initiatorPre: [Token], _ responderPre: [Token], _ messages: [[Token]]) {
        self.initiatorPreMessage = initiatorPre
        self.responderPreMessage = responderPre
        self.messages = messages
    }

    /// Noise §7.4 (one-way) and §7.5 (interactive) fundamental patterns.
    private static let fundamental: [String: HandshakePattern] = [
        "N": .init([], [.s], [[.e, .es]]),
        "K": .init([.s], [.s], [[.e, .es, .ss]]),
        "X": .init([], [.s], [[.e, .es, .s, .ss]]),
        "NN": .init([], [], [[.e], [.e, .ee]]),
        "NK": .init([], [.s], [[.e, .es], [.e, .ee]]),
        "NX": .init([], [], [[.e], [.e, .ee, .s, .es]]),
        "XN": .init([], [], [[.e], [.e, .ee], [.s, .se]]),
        "XK": .init([], [.s], [[.e, .es], [.e, .ee], [.s, .se]]),
        "XX": .init([], [], [[.e], [.e, .ee, .s, .es], [.s, .se]]),
        "KN": .init([.s], [], [[.e], [.e, .ee, .se]]),
        "KK": .init([.s], [.s], [[.e, .es, .ss], [.e, .ee, .se]]),
        "KX": .init([.s], [], [[.e], [.e, .ee, .se, .s, .es]]),
        "IN": .init([], [], [[.e, .s], [.e, .ee, .se]]),
        "IK": .init([], [.s], [[.e, .es, .s, .ss], [.e, .ee, .se]]),
        "IX": .init([], [], [[.e, .s], [.e, .ee, .se, .s, .es]]),
    ]
}
