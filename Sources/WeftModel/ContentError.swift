/// Why rich content (SPEC.md §17) was refused: a descriptor, a manifest, a chunk frame or a
/// chunk message that breaks a rule, or content that cannot be described.
///
/// `reason` is one of the static values of `ContentError.Reason` (new ones may come, so a
/// switch over them needs a default); `detail` says what exactly, for logs.
public struct ContentError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A kind of refusal. Its `rawValue` is the name the vectors use (`vectors/content.json`).
    public struct Reason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A descriptor's bytes break §17.1: too short or too long, size 0, chunkLog out of
        /// range, too many chunks.
        public static let malformedDescriptor = Self(rawValue: "malformedDescriptor")
        /// A manifest's bytes break §17.4: cut short, a count the bytes left cannot hold,
        /// bytes after the hashes.
        public static let malformedManifest = Self(rawValue: "malformedManifest")
        /// A manifest lists another number of hashes than its descriptor has chunks.
        public static let chunkCountMismatch = Self(rawValue: "chunkCountMismatch")
        /// A manifest's hashes make another root than its descriptor's.
        public static let rootMismatch = Self(rawValue: "rootMismatch")
        /// A chunk message too short to hold its root, index and flags (§17.6).
        public static let malformedChunkMessage = Self(rawValue: "malformedChunkMessage")
        /// A chunk message names other content than the one expected.
        public static let unexpectedContent = Self(rawValue: "unexpectedContent")
        /// A chunk index at or past the content's chunk count, or not the one expected.
        public static let indexOutOfRange = Self(rawValue: "indexOutOfRange")
        /// A chunk frame with flag bits other than bit 0 set, or with no flags byte at all.
        public static let badFlags = Self(rawValue: "badFlags")
        /// A compressed chunk payload zstd cannot decode, or whose frame asks for a window
        /// larger than the chunk needs.
        public static let corruptCompression = Self(rawValue: "corruptCompression")
        /// A chunk that is (or decompresses to) more or fewer bytes than its place in the
        /// content; for a sender, a chunk of another length than the chunking rule's.
        public static let wrongSize = Self(rawValue: "wrongSize")
        /// A chunk whose leaf hash is not the manifest's.
        public static let badHash = Self(rawValue: "badHash")
        /// Content of 0 bytes, or larger than any descriptor can describe.
        public static let unsupportedSize = Self(rawValue: "unsupportedSize")

        public var description: String { rawValue }
    }

    public let reason: Reason
    public let detail: String

    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { detail }
}
