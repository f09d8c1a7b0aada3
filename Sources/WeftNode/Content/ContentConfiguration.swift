import WeftTransfer

/// What a node's content service fetches by itself, and its bounds (SPEC.md §17.7, §17.8).
/// Local choices, not protocol.
///
/// A content part of a stored message is fetched automatically when it is at most
/// `automaticDownloadLimit` bytes, or its MIME type matches one of `automaticDownloadTypes`,
/// or the node takes every part of its conversation (`downloadsParticipantContent` for a
/// conversation the local user takes part in, `keepsRelayedContent` for one it only relays).
/// Any other part is fetched on demand (`ContentService.download`, `weft download`).
public struct ContentConfiguration: Sendable {
    /// Content parts of stored messages at or below this size are fetched automatically
    /// (2048 bytes, as in the SDK). Weft makes every part over 2048 bytes rich content, so on
    /// its own this fetches none of Weft's: the settings below are what fetch them.
    public var automaticDownloadLimit: UInt64 = 2048
    /// Content parts of these MIME types are fetched automatically whatever their size, in
    /// every conversation the node stores (none by default: the two settings below fetch
    /// everything already).
    public var automaticDownloadTypes: [MediaTypePattern] = []
    /// Fetch the content parts of every message in a conversation the local user takes part
    /// in, whatever their size (on by default: a recipient gets what it was sent).
    public var downloadsParticipantContent = true
    /// Fetch and keep the content parts of messages of conversations the node only relays
    /// (on by default: store and forward, so a recipient gets the content while its sender is
    /// offline, as a messaging service's server would).
    public var keepsRelayedContent = true

    /// The transfer scheduler's bounds and timings: wider windows than the scheduler's own
    /// defaults, so that one fast peer keeps up to 8 MiB of 512 KiB chunks in flight (on loopback,
    /// the chunks' round trips through both nodes, not the link, set the rate).
    public var transfer: TransferConfiguration = {
        var transfer = TransferConfiguration()
        transfer.initialWindow = 8
        transfer.maxWindow = 16
        transfer.maxRequestsInFlight = 128
        return transfer
    }()
    /// How often the scheduler's timer runs.
    public var tickInterval: Duration = .milliseconds(250)
    /// A peer asked for a manifest that has not answered within this is asked no more for now.
    public var manifestTimeout: Duration = .seconds(15)
    /// While no connected peer has a content's manifest, every peer is asked again this often.
    public var manifestRetryInterval: Duration = .seconds(30)
    /// A download paused by a full disk tries again this often.
    public var diskFullRetryInterval: Duration = .seconds(30)
    /// Contents wanted beyond those under way (`transfer.maxDownloads`) wait, up to this many;
    /// more are dropped with a log line.
    public var maxWaitingDownloads = 4_096

    /// Content no held message refers to any more is removed (retention, SPEC.md §11.2) only
    /// once none of its files changed for this long: content just added waits this long for the
    /// message that sends it, and a download under way is not stopped while chunks arrive.
    public var unreferencedGracePeriod: Duration = .seconds(3600)

    /// Chunks a peer identity may have asked for and not yet been sent (§17.8); more are dropped.
    public var maxQueuedChunksPerPeer = 128
    /// Manifests a peer identity may have asked for and not yet been sent; more are dropped.
    public var maxQueuedManifestsPerPeer = 4
    /// Manifests asked of one peer at once (within what a peer keeps for another: 4).
    public var maxManifestsAskedPerPeer = 2
    /// HOLDINGS answers waiting to be sent to one connection (one per content at most).
    public var maxQueuedHoldingsPerPeer = 256
    /// Contents a connection asked about that it is told of again when the node holds more.
    public var maxInterestsPerPeer = 256
    /// A peer is told again what the node holds of a content after this many more chunks.
    public var holdingsUpdateChunks = 64
    /// Chunks being verified and written at once; arriving chunks wait for room (and the
    /// connections they come on are read no further meanwhile).
    public var maxChunksVerifying = 4
    /// Events waiting for the download driver, at most.
    public var maxQueuedEvents = 256

    public init() {}
}
