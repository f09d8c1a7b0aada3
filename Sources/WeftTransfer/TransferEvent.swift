/// What happens to a node's downloads, as the transfer scheduler sees it. The driver turns the
/// user's requests, connection events, decoded and verified chunk frames, the store's state and
/// its timer into these.
///
/// `Content` names a content (its hash, in a node); `Peer` names a peer, and keeps its name
/// across connections (its identity), so a penalized peer stays penalized when it reconnects.
public enum TransferEvent<Content: Hashable & Sendable, Peer: Hashable & Sendable & Comparable>: Sendable {
    /// Download this content, split as `layout` says. `verified` are the chunks the store
    /// holds verified already (a resume after a restart): they are never requested. Nil: none.
    case wanted(Content, TransferLayout, verified: TransferChunkSet? = nil)
    /// Stop downloading this content (the driver keeps or drops what it wrote).
    case cancelled(Content)
    /// A peer is connected and can be asked for chunks.
    case connected(Peer)
    /// The connection to a peer ended (in any way): what was asked of it goes to the others.
    case disconnected(Peer)
    /// A peer says which chunks of a content it holds (in answer to `.ask`, or on its own when
    /// it gets more). Replaces what it said before. A set of another chunk count is ignored.
    case holdings(Peer, Content, TransferHoldings)
    /// A chunk arrived from a peer and the driver verified it (against the content's hashes)
    /// and wrote it: it counts, whether it was asked of that peer or not, once.
    case verified(Peer, Content, chunk: Int)
    /// A chunk arrived from a peer and failed verification (bad hash, bad frame): it counts
    /// against the peer, and the chunk is asked again.
    case corrupt(Peer, Content, chunk: Int)
    /// A peer answered that it does not hold a chunk: the core forgets it held it.
    case notHeld(Peer, Content, chunk: Int)
    /// The driver's timer, with a monotonic time in milliseconds: drives request timeouts.
    /// Every few hundred milliseconds is enough; requests are stamped with the latest tick.
    case tick(nowMilliseconds: UInt64)
    /// The store cannot take more chunks (disk full): every download pauses and what is in
    /// flight is cancelled.
    case storePaused
    /// The store can take chunks again.
    case storeResumed
}

/// What the transfer scheduler asks the driver to do, in order.
public enum TransferAction<Content: Hashable & Sendable, Peer: Hashable & Sendable & Comparable>: Sendable, Equatable {
    /// Ask the peer which chunks of the content it holds; it answers with `.holdings`.
    case ask(Peer, Content)
    /// Ask the peer for these chunks of the content (ascending, none already asked of it).
    case request(Peer, Content, chunks: [Int])
    /// Tell the peer not to send these chunks after all (asked of it, not answered): the
    /// request timed out, another copy arrived first, or the download stopped. A copy that
    /// arrives anyway is still reported (`.verified` counts it if it is the first).
    case cancel(Peer, Content, chunks: [Int])
    /// Bytes of the content held verified, of its total. Never goes backwards; reported once
    /// when the download starts (what a resume starts from) and after each chunk verified.
    case progress(Content, verifiedByteCount: UInt64, totalByteCount: UInt64)
    /// Every chunk of the content is verified; the download is over.
    case completed(Content)
    /// Nothing of the content can be asked for now (the download waits; it carries on
    /// by itself, with `.resumed`, when that changes).
    case paused(Content, TransferPauseReason)
    /// A paused download is being asked for again.
    case resumed(Content)
    /// The download is over without the content.
    case failed(Content, TransferFailure)
    /// The peer sent `badChunks` chunks that failed verification, the limit: the core asks it
    /// for nothing more (for as long as it remembers it); close the connection.
    case penalize(Peer, badChunks: Int)
}

/// Why a download waits.
public struct TransferPauseReason: Sendable, Hashable, CustomStringConvertible {
    private enum Base: Hashable { case noSource, sourcesOffline, storeFull }
    private let base: Base

    /// No connected peer holds a chunk the content lacks, and none that did went away.
    public static let noSource = TransferPauseReason(base: .noSource)
    /// Peers that held chunks the content lacks disconnected, and no connected peer holds them.
    public static let sourcesOffline = TransferPauseReason(base: .sourcesOffline)
    /// The store is paused (`.storePaused`: disk full).
    public static let storeFull = TransferPauseReason(base: .storeFull)

    public var description: String {
        switch base {
        case .noSource: "no connected peer holds the missing chunks"
        case .sourcesOffline: "every peer holding the missing chunks is offline"
        case .storeFull: "the store is full"
        }
    }
}

/// Why a download ended without its content.
public struct TransferFailure: Sendable, Hashable, CustomStringConvertible {
    private enum Base: Hashable { case corruptSources, tooManyChunks, tooManyDownloads }
    private let base: Base

    /// Every connected peer that holds a missing chunk served bad data for it (it is
    /// penalized, or sent that chunk corrupt as often as the core asks one peer).
    public static let corruptSources = TransferFailure(base: .corruptSources)
    /// The content has more chunks than `TransferConfiguration.maxChunkCount`.
    public static let tooManyChunks = TransferFailure(base: .tooManyChunks)
    /// `TransferConfiguration.maxDownloads` downloads are under way already.
    public static let tooManyDownloads = TransferFailure(base: .tooManyDownloads)

    public var description: String {
        switch base {
        case .corruptSources: "every source served bad data"
        case .tooManyChunks: "the content has too many chunks"
        case .tooManyDownloads: "too many downloads are under way"
        }
    }
}
