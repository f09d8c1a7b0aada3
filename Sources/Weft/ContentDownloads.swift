import WeftControl
import WeftModel

/// What the control API needs of a node's rich content (SPEC.md §17): fetching a part's
/// content with its progress, and where each content's transfer stands, for message records.
public protocol ContentDownloads: Sendable {
    /// Fetches the content (if it is not whole here yet), copies it to `path` unless empty,
    /// and hands `emit` the progress as it changes; returns once it is whole (and copied), or
    /// throws a `ControlFailure` saying why it cannot be (failed, or paused for good).
    func download(
        _ descriptor: ContentDescriptor, mimeType: String, to path: String, _ emit: @escaping @Sendable (DownloadProgress) async throws -> Void
    ) async throws

    /// Where the content's transfer stands here, as a message record shows it.
    func state(of descriptor: ContentDescriptor, sentByLocalUser: Bool) -> MessageRecord.ContentState

    /// Counters for STATISTICS (chunks served, received, verified, corrupt, ...).
    var counters: [ReplicationCounter] { get }
}
