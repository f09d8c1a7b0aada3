/// Why a length-prefixed or text field was refused. Each format restates it in its own error
/// (`WeftWireError`, `OperationError`, `WeftCryptoError`), so only this package sees it.
@usableFromInline
package enum ByteFieldError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A length prefix announced more bytes than the field may hold.
    case tooLong(length: Int, limit: Int)
    /// A text field is not valid UTF-8.
    case invalidUTF8

    @usableFromInline
    package var description: String {
        switch self {
        case .tooLong(let length, let limit): "a field of \(length) bytes is longer than the limit of \(limit)"
        case .invalidUTF8: "a text field is not valid UTF-8"
        }
    }
}
