/// Why the content store refused a call (SPEC.md §11.2). A struct over a private enum, so new
/// cases do not break users; compare `code` with the static members
/// (`error.code == .diskFull`). `message` is one sentence for logs and users.
public struct ContentStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case invalidRoot
            case invalidLayout
            case conflictingLayout
            case chunkOutOfRange
            case wrongChunkLength
            case wrongHashLength
            case chunkMissing
            case readTooLarge
            case incomplete
            case notHeld
            case closed
            case diskFull
            case fileSystem
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A root that is not 32 bytes.
        public static let invalidRoot = Code(.invalidRoot)
        /// A layout the store cannot hold: no bytes, a chunk size out of range, a chunk count
        /// that does not match the size, or more chunks than `ContentStore.maxChunkCount`.
        public static let invalidLayout = Code(.invalidLayout)
        /// The content is held with another size, chunk size or chunk count than the call
        /// gives; nothing was changed (`ContentStore.remove` starts it afresh).
        public static let conflictingLayout = Code(.conflictingLayout)
        /// A chunk index (or range) past the content's last chunk.
        public static let chunkOutOfRange = Code(.chunkOutOfRange)
        /// Chunk bytes whose length is not the chunk's (the chunk size, less for the last).
        public static let wrongChunkLength = Code(.wrongChunkLength)
        /// A chunk hash that is not 32 bytes.
        public static let wrongHashLength = Code(.wrongHashLength)
        /// A read asked for a chunk that is not verified.
        public static let chunkMissing = Code(.chunkMissing)
        /// A read asked for more than `ContentStore.maxReadByteCount` bytes.
        public static let readTooLarge = Code(.readTooLarge)
        /// `complete()` before every chunk was verified.
        public static let incomplete = Code(.incomplete)
        /// Nothing is held for that root.
        public static let notHeld = Code(.notHeld)
        /// The partial content was closed, completed or removed; open it again.
        public static let closed = Code(.closed)
        /// The file system is full (ENOSPC, or the user's quota: EDQUOT). The chunks the
        /// failure concerns are not verified; pause the transfer with this reason.
        public static let diskFull = Code(.diskFull)
        /// Any other file system failure, with the call, path and `strerror` in the message.
        public static let fileSystem = Code(.fileSystem)

        public var description: String {
            switch base {
            case .invalidRoot: "invalid root"
            case .invalidLayout: "invalid layout"
            case .conflictingLayout: "conflicting layout"
            case .chunkOutOfRange: "chunk out of range"
            case .wrongChunkLength: "wrong chunk length"
            case .wrongHashLength: "wrong hash length"
            case .chunkMissing: "chunk missing"
            case .readTooLarge: "read too large"
            case .incomplete: "incomplete"
            case .notHeld: "not held"
            case .closed: "closed"
            case .diskFull: "disk full"
            case .fileSystem: "file system error"
            }
        }
    }

    public let code: Code
    /// One sentence saying what went wrong, for logs and users.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
