import WeftModel

/// Every error the client API throws: a struct over a private enum, so new cases do not break
/// callers; `description` is one sentence a person can act on.
public struct WeftError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case invalidMIMEType(String)
        case noParts
        case unknownConversation(String)
        case unknownMessage(String)
        case notAParticipant
        case noParticipants
        case invalidIdentifier(String)
        case timedOut(String)
        case notPermitted(String)
        case storage(String)
        case tooLarge(String)
        case contentUnavailable(String)
    }

    private let kind: Kind
    private init(_ kind: Kind) { self.kind = kind }

    /// A part's MIME type is not of the form type/subtype.
    public static func invalidMIMEType(_ type: String) -> Self { Self(.invalidMIMEType(type)) }
    /// A message needs at least one part.
    public static let noParts = Self(.noParts)
    public static func unknownConversation(_ id: String) -> Self { Self(.unknownConversation(id)) }
    public static func unknownMessage(_ id: String) -> Self { Self(.unknownMessage(id)) }
    /// The local user is not a participant of the conversation.
    public static let notAParticipant = Self(.notAParticipant)
    /// A conversation needs at least one other participant.
    public static let noParticipants = Self(.noParticipants)
    /// A `weft:///...` identifier that does not parse.
    public static func invalidIdentifier(_ text: String) -> Self { Self(.invalidIdentifier(text)) }
    /// `waitForObject` gave up.
    public static func timedOut(_ what: String) -> Self { Self(.timedOut(what)) }
    /// The operation is not allowed (for example deleting another sender's message).
    public static func notPermitted(_ why: String) -> Self { Self(.notPermitted(why)) }
    /// A field or the whole operation exceeds the protocol's limits (SPEC §12).
    public static func tooLarge(_ what: String) -> Self { Self(.tooLarge(what)) }
    /// The store failed.
    public static func storage(_ why: String) -> Self { Self(.storage(why)) }
    /// A part's rich content (SPEC.md §17) cannot be had here: this client follows no node's
    /// content, or its transfer failed or stopped.
    public static func contentUnavailable(_ why: String, root: ContentRoot? = nil) -> Self {
        Self(.contentUnavailable(root.map { "content \($0.hex.prefix(16)): \(why)" } ?? why))
    }

    public var description: String {
        switch kind {
        case .invalidMIMEType(let type): "The MIME type \"\(type)\" is not of the form type/subtype."
        case .noParts: "A message needs at least one part."
        case .unknownConversation(let id): "There is no conversation \(id)."
        case .unknownMessage(let id): "There is no message \(id)."
        case .notAParticipant: "The local user is not a participant of this conversation."
        case .noParticipants: "A conversation needs at least one participant besides the local user."
        case .invalidIdentifier(let text): "\"\(text)\" is not a Weft object identifier."
        case .timedOut(let what): "Timed out waiting for \(what)."
        case .notPermitted(let why): "Not permitted: \(why)."
        case .storage(let why): "The store failed: \(why)."
        case .tooLarge(let what): "Too large: \(what)."
        case .contentUnavailable(let why): "The content is not available: \(why)."
        }
    }
}

extension WeftError {
    /// Which error this is, for programs that answer each differently (the daemon's control
    /// socket maps them to its error codes).
    public enum Code: Hashable, Sendable {
        case invalidMIMEType, noParts, unknownConversation, unknownMessage, notAParticipant, noParticipants
        case invalidIdentifier, timedOut, notPermitted, storage, tooLarge, contentUnavailable
    }

    public var code: Code {
        switch kind {
        case .invalidMIMEType: .invalidMIMEType
        case .noParts: .noParts
        case .unknownConversation: .unknownConversation
        case .unknownMessage: .unknownMessage
        case .notAParticipant: .notAParticipant
        case .noParticipants: .noParticipants
        case .invalidIdentifier: .invalidIdentifier
        case .timedOut: .timedOut
        case .notPermitted: .notPermitted
        case .storage: .storage
        case .tooLarge: .tooLarge
        case .contentUnavailable: .contentUnavailable
        }
    }
}
