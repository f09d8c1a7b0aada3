/// A refused request or a broken connection, as the ERROR response carries it (SPEC.md §15.6):
/// a code a program can switch on and one sentence a person can act on.
public struct ControlFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// The ERROR codes of SPEC.md §15.6. A struct, so a reader keeps codes it does not know.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        // Bad frames: the node answers, then closes the connection.
        public static let malformedRequest = Code(rawValue: 1)
        public static let frameTooLarge = Code(rawValue: 2)
        public static let unknownRequestType = Code(rawValue: 3)
        // Refused requests: the connection stays open.
        public static let unknownConversation = Code(rawValue: 10)
        public static let unknownMessage = Code(rawValue: 11)
        public static let invalidMIMEType = Code(rawValue: 12)
        public static let notAParticipant = Code(rawValue: 13)
        public static let noParticipants = Code(rawValue: 14)
        public static let tooLarge = Code(rawValue: 15)
        public static let timedOut = Code(rawValue: 16)
        public static let notPermitted = Code(rawValue: 17)
        public static let invalidArgument = Code(rawValue: 18)
        public static let notSupported = Code(rawValue: 19)
        public static let storageFailed = Code(rawValue: 20)
        public static let internalError = Code(rawValue: 21)

        /// Whether the node closes the connection after sending this code.
        public var closesConnection: Bool { rawValue >= 1 && rawValue <= 3 }

        public var description: String { "\(rawValue)" }
    }

    public let code: Code
    /// One sentence, at most `ControlConstants.maxErrorTextByteCount` bytes of UTF-8.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    static func malformed(_ why: String) -> ControlFailure { ControlFailure(.malformedRequest, "Malformed control frame: \(why).") }
}
