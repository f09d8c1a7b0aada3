/// Damaged capture input, said in one sentence with where it is: the byte offset in the
/// capture file (or stream) at which the damage starts.
public struct CaptureError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Where the damage starts, in bytes from the start of the input.
    public let offset: Int
    public let reason: String

    public init(offset: Int, _ reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "at byte \(offset): \(reason)" }
}
