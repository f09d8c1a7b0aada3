/// Where a content stands on this node (the SDK's rich-content transfer status).
public enum ContentTransferStatus: Sendable, Hashable, CustomStringConvertible {
    /// Added here; no peer has fetched a chunk of it yet.
    case awaitingUpload
    /// Added here; peers are fetching it (some chunks have been sent, not yet all).
    case uploading
    /// Held elsewhere; not being fetched here (download it on demand).
    case readyForDownload
    /// Being fetched.
    case downloading
    /// Held here whole (and, for content added here, every chunk sent at least once).
    case complete
    /// Being fetched, but waiting: no connected peer holds what is missing, every peer that
    /// did is offline, or the disk is full.
    case paused(reason: String)
    /// Not being fetched any more, and why (every source served bad data, too many downloads,
    /// a storage error).
    case failed(reason: String)

    public var description: String {
        switch self {
        case .awaitingUpload: "awaiting upload"
        case .uploading: "uploading"
        case .readyForDownload: "ready for download"
        case .downloading: "downloading"
        case .complete: "complete"
        case .paused(let reason): "paused: \(reason)"
        case .failed(let reason): "failed: \(reason)"
        }
    }
}

/// How far a content's transfer is, in verified uncompressed bytes, and what crossed the wire.
public struct ContentProgress: Sendable, Hashable {
    /// Bytes of the content held verified (a download), or sent at least once (an upload).
    /// Never goes backwards, also across a restart after the node was killed: a download
    /// counts only chunks whose journal records are written, which the kernel keeps when the
    /// process dies (a power loss may take back what no background sync covered yet). An
    /// upload sent whole stays so across a restart; one that was not counts its chunks sent
    /// again from 0 after it (which were sent is not kept, `PendingUploads`).
    public var verifiedBytes: UInt64
    /// The content's size.
    public var totalBytes: UInt64
    /// Chunk frame bytes received (a download) or sent (an upload) since the node started:
    /// compressed frames count what they took on the wire.
    public var wireBytes: UInt64
    /// Wire bytes per second, over the last second or so.
    public var bytesPerSecond: Double

    public init(verifiedBytes: UInt64, totalBytes: UInt64, wireBytes: UInt64 = 0, bytesPerSecond: Double = 0) {
        self.verifiedBytes = verifiedBytes
        self.totalBytes = totalBytes
        self.wireBytes = wireBytes
        self.bytesPerSecond = bytesPerSecond
    }

    /// `verifiedBytes / totalBytes`, from 0 to 1 (1 for an empty total).
    public var fraction: Double {
        totalBytes == 0 ? 1 : min(1, Double(verifiedBytes) / Double(totalBytes))
    }

    /// Progress over several contents, weighted by size: the sums of their bytes and rates.
    public static func aggregate(_ parts: [ContentProgress]) -> ContentProgress {
        parts.reduce(ContentProgress(verifiedBytes: 0, totalBytes: 0)) {
            ContentProgress(
                verifiedBytes: $0.verifiedBytes + $1.verifiedBytes, totalBytes: $0.totalBytes + $1.totalBytes,
                wireBytes: $0.wireBytes + $1.wireBytes, bytesPerSecond: $0.bytesPerSecond + $1.bytesPerSecond)
        }
    }
}

/// Why the content service refused a call, in one sentence. A struct over a private enum, so
/// new cases do not break users; compare `code`.
public struct ContentServiceError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable {
        private enum Base: Hashable, Sendable { case unsupportedSize, unreadableFile, storage, stopped }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Content of no bytes, or over 8 GiB (SPEC.md §17): it cannot be rich content.
        public static let unsupportedSize = Code(.unsupportedSize)
        /// The file to add cannot be read (or changed size while it was read).
        public static let unreadableFile = Code(.unreadableFile)
        /// The content store failed (the disk is full, say).
        public static let storage = Code(.storage)
        /// The service has stopped.
        public static let stopped = Code(.stopped)
    }

    public let code: Code
    public let description: String

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
