import WeftModel
import WeftNode

/// What a client needs of a node's rich content (SPEC.md §17) to follow and fetch the content
/// parts of messages: a node's `ContentService` (`LocalNode.content`, `InProcessNode.content`).
/// `WeftClient.contentProgress(ofPart:in:)`, `contentProgress(of:)` and
/// `downloadContent(ofPart:in:)` go through it.
public protocol ContentTransfers: Sendable {
    /// Where the content's transfer stands on the node.
    func status(of root: ContentRoot) -> ContentTransferStatus

    /// The content's progress on the node as it stands, if it is being transferred (or was,
    /// since the node started); nil otherwise.
    func currentProgress(of root: ContentRoot) -> ContentProgress?

    /// The content's progress on the node: what is known now, then each change, until it is
    /// complete (the last value's fraction is then exactly 1), failed, or the node stopped.
    func progress(of root: ContentRoot) -> AsyncStream<ContentProgress>

    /// Fetches the content on demand, until it is whole (also after a restart); returns once
    /// that is queued. `mimeType` is the part's.
    func download(_ descriptor: ContentDescriptor, mimeType: String?) async
}

extension ContentService: ContentTransfers {}
